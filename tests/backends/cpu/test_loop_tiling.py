"""A loop that reads an operand down its columns (a transpose, or layouts that differ) walks the
output in 32 x 32 blocks; the results are the interpreter's, bit for bit, for sizes that are not
multiples of the block, with the outer loop split across threads, and in higher ranks."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.backends.cpu.kernels.loop import reads_across_rows
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo


def transpose_add(dims: tuple[int, ...], permutation: tuple[int, ...]) -> str:
    out = tuple(dims[p] for p in permutation)
    text = ",".join(map(str, dims))
    out_text = ",".join(map(str, out))
    perm = ",".join(map(str, permutation))
    return (f"HloModule m\nENTRY e {{\n  a = f32[{text}] parameter(0)\n  b = f32[{out_text}] parameter(1)\n"
            f"  t = f32[{out_text}] transpose(a), dimensions={{{perm}}}\n  e = f32[{out_text}] negate(t)\n"
            f"  ROOT r = f32[{out_text}] add(e, b)\n}}\n")


@pytest.mark.parametrize(("dims", "permutation"), [((70, 100), (1, 0)), ((64, 64), (1, 0)), ((3, 65, 129), (0, 2, 1)),
                                                   ((65, 3, 130), (2, 1, 0)), ((300, 257), (1, 0))])
def test_blocked_loops_match_the_interpreter(dims: tuple[int, ...], permutation: tuple[int, ...]) -> None:
    text = transpose_add(dims, permutation)
    executable = compile_module(text, "cpu")
    loops = [i for i in executable.module.entry.instructions if i.opcode in ("fusion", "add", "transpose")]
    assert any(reads_across_rows(i) for i in loops), executable.module.to_text()
    rng = np.random.default_rng(len(dims))
    a = rng.standard_normal(dims).astype(np.float32)
    b = rng.standard_normal(tuple(dims[p] for p in permutation)).astype(np.float32)
    (got,) = executable.execute([a, b])
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text), [a, b])
    np.testing.assert_array_equal(got, want)


def test_loops_that_read_along_rows_are_not_blocked() -> None:
    text = ("HloModule m\nENTRY e {\n  a = f32[128,128] parameter(0)\n  b = f32[128,128] parameter(1)\n"
            "  ROOT r = f32[128,128] add(a, b)\n}\n")
    executable = compile_module(text, "cpu")
    assert not any(reads_across_rows(i) for i in executable.module.entry.instructions if i.opcode != "parameter")
