"""Every opcode has an entry in the operation-semantics table (xla_teach/hlo/op_semantics.py),
and every example there computes what its NumPy expression says, on the interpreter and on the
CPU backend: the documentation page is generated from these, so it cannot drift."""

from __future__ import annotations

import math  # noqa: F401 - the examples' expressions may use it

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.op_semantics import SEMANTICS, missing
from xla_teach.hlo.text.parser import parse_hlo

EXAMPLES = sorted(op for op, s in SEMANTICS.items() if s.example is not None)


def test_every_opcode_has_semantics() -> None:
    assert missing() == []


def test_every_opcode_that_runs_on_one_device_has_an_example() -> None:
    """Only ops that need several devices, hidden random state, a token, a target the compiler
    does not know, or a layout pass to be written go without one."""
    from xla_teach.hlo.opcodes import OPCODES, OpKind

    without = {op for op, s in SEMANTICS.items() if s.example is None}
    collectives = {op for op in OPCODES if OPCODES[op].kind == OpKind.SPECIAL and op.startswith(("all-", "coll", "red"))}
    assert without == collectives | {"rng", "rng-bit-generator", "rng-get-and-update-state", "after-all",
                                     "custom-call", "bitcast"}


def _expected(opcode: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    example = SEMANTICS[opcode].example
    assert example is not None
    args = [np.asarray(values, dtype=dtype) for values, dtype in example.args]
    names = dict(zip("xyz", args, strict=False))
    want = eval(example.expected, {"np": np, "math": math}, names)  # noqa: S307 - the table's own expressions
    return args, [np.asarray(w) for w in (want if isinstance(want, tuple) else (want,))]


def _assert_close(got: np.ndarray, want: np.ndarray, ulps: int, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if ulps == 0 or got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    room = ulps * np.spacing(np.abs(want).astype(got.dtype))
    assert np.all((np.abs(got - want) <= room) | (got == want) | (np.isnan(got) & np.isnan(want))), \
        f"{what}: {got} vs {want} (allowed {ulps} ulps)"


@pytest.mark.parametrize("opcode", EXAMPLES)
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_the_example_computes_what_the_page_says(opcode: str, backend: str) -> None:
    example = SEMANTICS[opcode].example
    assert example is not None
    args, want = _expected(opcode)
    module = parse_hlo(example.module)
    if backend == "interpreter":
        got = HloEvaluator().evaluate_module(module, args)
    else:
        got = compile_module(module, "cpu").execute(args)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _assert_close(g, w.astype(np.asarray(g).dtype) if w.dtype == np.float64 and np.asarray(g).dtype != w.dtype
                      else w, example.ulps, f"{opcode} on {backend}, output {i}")
