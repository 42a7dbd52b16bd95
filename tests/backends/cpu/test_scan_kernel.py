"""Prefix scans (cumsum, cumprod, cummax as JAX writes them: a reduce-window over a whole axis)
get a one-pass kernel; its results equal the interpreter's bit for bit, forward and reversed, on
any axis and layout, and the general reduce-window kernel still serves every other window."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.backends.cpu.kernels.scan import scan_dimension
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.text.parser import parse_hlo

SCAN = """HloModule scan
r {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] {op}(a, b) }}
ENTRY main {{
  x = {t}[{dims}]{layout} parameter(0)
  init = {t}[] constant({init})
  ROOT s = {t}[{dims}]{layout} reduce-window(x, init), window={{size={size} pad={pad}}}, to_apply=r
}}
"""


def scan_module(t: str, op: str, init: str, dims: tuple[int, ...], axis: int, reverse: bool, layout: str = "") -> str:
    n = dims[axis]
    size = "x".join(str(n) if d == axis else "1" for d in range(len(dims)))
    pad = "x".join((f"0_{n - 1}" if reverse else f"{n - 1}_0") if d == axis else "0_0" for d in range(len(dims)))
    return SCAN.format(t=t, op=op, init=init, dims=",".join(map(str, dims)), layout=layout, size=size, pad=pad)


@pytest.mark.parametrize("t,op,init", [("f32", "add", "0"), ("f32", "multiply", "1"), ("f32", "maximum", "-inf"),
                                       ("s32", "add", "0"), ("f64", "minimum", "inf"), ("s32", "xor", "0")])
@pytest.mark.parametrize("dims,axis,reverse,layout", [((7, 300), 1, False, ""), ((7, 300), 0, False, ""),
                                                      ((3, 5, 9), 1, True, ""), ((64,), 0, False, ""),
                                                      ((6, 40), 1, False, "{0,1}")])
def test_scan_kernel_equals_the_interpreter(t: str, op: str, init: str, dims: tuple[int, ...], axis: int,
                                            reverse: bool, layout: str) -> None:
    text = scan_module(t, op, init, dims, axis, reverse, layout)
    module = parse_hlo(text)
    expected = None if reverse and t[0] == "f" and op in ("add", "multiply") else (axis, reverse)
    assert scan_dimension(module.entry.root) == expected
    rng = np.random.default_rng(len(dims) * 10 + axis)
    if t == "s32":
        x = rng.integers(-100, 100, dims).astype(np.int32)
    else:
        x = (rng.standard_normal(dims) * (0.3 if op == "multiply" else 1.0)).astype(np.dtype({"f32": "float32", "f64": "float64"}[t]))
        x.flat[::17] = np.nan if op != "multiply" else 1.0
    (got,) = compile_module(text, "cpu").execute([x])
    (want,) = HloEvaluator().evaluate_module(module, [x])
    np.testing.assert_array_equal(got, want)


def test_other_windows_and_float_suffix_sums_are_not_scans() -> None:
    for size, pad, n in (("1x3", "0_0x2_0", 300), ("1x300", "0_0x298_0", 299), ("1x300", "0_0x0_299", 300)):
        text = ("HloModule w\nr { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }\n"
                "ENTRY e {\n  x = f32[7,300] parameter(0)\n  z = f32[] constant(0)\n"
                f"  ROOT s = f32[7,{n}] reduce-window(x, z), window={{size={size} pad={pad}}}, to_apply=r\n}}\n")
        assert scan_dimension(parse_hlo(text).entry.root) is None, (size, pad)
