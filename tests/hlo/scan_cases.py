"""``scan`` modules shared by the interpreter's tests against XLA (tests/hlo/test_scan.py) and the
backends' tests (tests/passes/test_scan_expander.py), with the error each result may have.

How far two correct results may lie apart (``allowed_error``) follows from how they may differ:

* ``exact``: integers, max/min, and float bodies whose every step is exact -- bit for bit;
* ``sum``: a cumulative ``add`` that an implementation may group its own way (``is_associative``,
  or the ``reduce-window`` the expander writes): element k adds n = k + 2 terms (the init, then
  x[0..k]) and any order of them lies within gamma_n * sum|terms| of the exact sum, so two orders
  within twice that;
* ``product``: likewise for ``multiply``: within gamma_n * prod|terms| each, twice between two;
* ``steps``: a float body run step by step in the same order by both (one may contract a
  multiply-add into one rounding): one rounding per step and carried value, so after L steps
  at most 2 L u times the largest value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.text.parser import parse_hlo


@dataclass(frozen=True)
class ScanCase:
    name: str
    text: str
    args: Callable[[np.random.Generator], list[np.ndarray]]
    rounding: str = "exact"  # "exact", "sum", "product" or "steps" (see the module docstring)
    on_xla: bool = True  # XLA runs it (jaxlib 0.10.2 fails on a scan of length 0)

    def scan(self) -> HloInstruction:
        return next(i for c in parse_hlo(self.text).computations for i in c.instructions if i.opcode == "scan")


def _f32(values: object) -> np.ndarray:
    return np.asarray(values, np.float32)


AFFINE = """HloModule affine
body {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  a2 = f32[] multiply(a, two)
  s = f32[] add(a2, b)
  ten = f32[] constant(10)
  d = f32[] subtract(b, ten)
  ROOT t = (f32[], f32[]) tuple(s, d)
}
ENTRY e {
  x = f32[4] parameter(0)
  i = f32[] parameter(1)
  ROOT r = (f32[4], f32[]) scan(x, i), dimensions={0}, num_carries=1ATTRS, to_apply=body
}
"""

AFFINE_ROWS = """HloModule affine_rows
body {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  two = f32[] constant(2)
  twos = f32[3] broadcast(two), dimensions={}
  a2 = f32[3] multiply(a, twos)
  s = f32[3] add(a2, b)
  ten = f32[] constant(10)
  tens = f32[3] broadcast(ten), dimensions={}
  d = f32[3] subtract(b, tens)
  ROOT t = (f32[3], f32[3]) tuple(s, d)
}
ENTRY e {
  x = f32[3,9] parameter(0)
  i = f32[3] parameter(1)
  ROOT r = (f32[3,9], f32[3]) scan(x, i), dimensions={1}, num_carries=1, to_apply=body
}
"""

# Exactly as JAX 0.11.2 writes jnp.cumsum of an f32[5,1] along axis 1.
JAX_CUMSUM = """HloModule jit_cumsum, entry_computation_layout={(f32[5,1]{1,0})->f32[5,1]{1,0}}
region_0.1 {
  cumsum.3 = f32[5]{0} parameter(0)
  cumsum.4 = f32[5]{0} parameter(1)
  cumsum.5 = f32[5]{0} add(cumsum.3, cumsum.4)
  ROOT tuple.1 = (f32[5]{0}, f32[5]{0}) tuple(cumsum.5, cumsum.5)
}
ENTRY main.2 {
  Arg_0.2 = f32[5,1]{1,0} parameter(0)
  constant.1 = f32[] constant(0)
  broadcast.1 = f32[5]{0} broadcast(constant.1), dimensions={}
  cumsum.9 = (f32[5,1]{1,0}, f32[5]{0}) scan(Arg_0.2, broadcast.1), dimensions={1}, num_carries=1, is_associative=true, to_apply=region_0.1
  ROOT cumsum.10 = f32[5,1]{1,0} get-tuple-element(cumsum.9), index=0
}
"""


def cumulative(name: str, t: str, dims: tuple[int, int], d: int, op: str, init: str, *, reverse: bool = False,
               swapped: bool = False, associative: bool = True) -> str:
    """``jnp.cum<op>`` of a ``t[dims]`` along ``d`` as JAX writes it; ``swapped``: ``op(carry, x)``."""
    kept = dims[1 - d]
    operands = "c, x" if swapped else "x, c"
    attrs = (", is_reverse=true" if reverse else "") + (", is_associative=true" if associative else "")
    return f"""HloModule {name}
region {{
  x = {t}[{kept}] parameter(0)
  c = {t}[{kept}] parameter(1)
  r = {t}[{kept}] {op}({operands})
  ROOT t = ({t}[{kept}], {t}[{kept}]) tuple(r, r)
}}
ENTRY main {{
  a = {t}[{dims[0]},{dims[1]}] parameter(0)
  k = {t}[] constant({init})
  init = {t}[{kept}] broadcast(k), dimensions={{}}
  s = ({t}[{dims[0]},{dims[1]}], {t}[{kept}]) scan(a, init), dimensions={{{d}}}, num_carries=1{attrs}, to_apply=region
  ROOT out = {t}[{dims[0]},{dims[1]}] get-tuple-element(s), index=0
}}
"""


TWO_INPUTS_TWO_CARRIES = """HloModule two_by_two
body {
  a = s32[3] parameter(0)
  b = s32[3] parameter(1)
  c = s32[3] parameter(2)
  d = s32[3] parameter(3)
  m = s32[3] multiply(a, c)
  s = s32[3] add(m, b)
  x = s32[3] xor(d, s)
  ROOT t = (s32[3], s32[3], s32[3]) tuple(s, x, m)
}
ENTRY e {
  x = s32[3,4] parameter(0)
  y = s32[3,4] parameter(1)
  i = s32[3] parameter(2)
  j = s32[3] parameter(3)
  ROOT r = (s32[3,4], s32[3], s32[3]) scan(x, y, i, j), dimensions={1}, num_carries=2, is_reverse=true, to_apply=body
}
"""

NO_CARRIES = """HloModule no_carries
body {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  d = f32[3] subtract(a, b)
  m = f32[3] multiply(d, a)
  ROOT t = (f32[3], f32[3]) tuple(m, d)
}
ENTRY e {
  x = f32[4,3] parameter(0)
  y = f32[4,3] parameter(1)
  ROOT r = (f32[4,3], f32[4,3]) scan(x, y), dimensions={0}, num_carries=0, to_apply=body
}
"""

# A running maximum from a parameter (not a constant), and a running sum of integers that wraps.
INTEGER_CUMULATIVE = """HloModule integer_cumulative
running_max {
  x = s32[6] parameter(0)
  c = s32[6] parameter(1)
  m = s32[6] maximum(c, x)
  ROOT t = (s32[6], s32[6]) tuple(m, m)
}
running_sum {
  xs = s8[6] parameter(0)
  cs = s8[6] parameter(1)
  s = s8[6] add(xs, cs)
  ROOT ts = (s8[6], s8[6]) tuple(s, s)
}
ENTRY e {
  a = s32[6,5] parameter(0)
  start = s32[6] parameter(1)
  mx = (s32[6,5], s32[6]) scan(a, start), dimensions={1}, num_carries=1, to_apply=running_max
  b = s8[6,5] parameter(2)
  seven = s8[] constant(7)
  sevens = s8[6] broadcast(seven), dimensions={}
  sm = (s8[6,5], s8[6]) scan(b, sevens), dimensions={1}, num_carries=1, is_reverse=true, to_apply=running_sum
  ROOT t = ((s32[6,5], s32[6]), (s8[6,5], s8[6])) tuple(mx, sm)
}
"""

CARRY_ONLY = """HloModule carry_only
body {
  b = f32[] parameter(0)
  one = f32[] constant(1)
  s = f32[] add(b, one)
  ROOT t = (f32[], f32[]) tuple(b, s)
}
ENTRY e {
  i = f32[] parameter(0)
  ROOT r = (f32[3], f32[]) scan(i), dimensions={0}, num_carries=1, to_apply=body
}
"""

# Each step's output is f32[2,2]; stacked along dimension 1 it is f32[2,3,2].
STACKED_RANK_2 = """HloModule stacked
body {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  s = f32[2] add(a, b)
  k = f32[2,2] broadcast(s), dimensions={0}
  ROOT t = (f32[2,2], f32[2]) tuple(k, s)
}
ENTRY e {
  x = f32[2,3] parameter(0)
  i = f32[2] parameter(1)
  ROOT r = (f32[2,3,2], f32[2]) scan(x, i), dimensions={1}, num_carries=1, to_apply=body
}
"""

EMPTY = """HloModule empty
body {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  s = f32[2] add(a, b)
  ROOT t = (f32[2], f32[2]) tuple(s, s)
}
ENTRY e {
  x = f32[2,0] parameter(0)
  i = f32[2] parameter(1)
  ROOT r = (f32[2,0], f32[2]) scan(x, i), dimensions={1}, num_carries=1, to_apply=body
}
"""


def _normal(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def _ints(low: int, high: int, shape: tuple[int, ...], dtype: type) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.integers(low, high, shape).astype(dtype)


def _scaled(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    """Factors in [0.5, 2): products of a few dozen stay far from overflow."""
    return lambda rng: rng.uniform(0.5, 2.0, shape).astype(np.float32)


CASES = [
    ScanCase("affine", AFFINE.replace("ATTRS", ""), lambda rng: [_f32([1, 2, 3, 4]), _f32(100)]),
    ScanCase("affine_reverse", AFFINE.replace("ATTRS", ", is_reverse=true"),
             lambda rng: [_f32([1, 2, 3, 4]), _f32(100)]),
    ScanCase("affine_rows", AFFINE_ROWS, lambda rng: [_normal(3, 9)(rng), _normal(3)(rng)], "steps"),
    ScanCase("jax_cumsum_5x1", JAX_CUMSUM, lambda rng: [_normal(5, 1)(rng)], "sum"),
    ScanCase("cumsum_rows", cumulative("cumsum_rows", "f32", (4, 37), 1, "add", "0"),
             lambda rng: [_normal(4, 37)(rng)], "sum"),
    ScanCase("cumsum_columns_reversed", cumulative("cumsum_cols", "f32", (37, 4), 0, "add", "0", reverse=True),
             lambda rng: [_normal(37, 4)(rng)], "sum"),
    ScanCase("cumsum_from_a_parameter", cumulative("cumsum_from", "f32", (6, 13), 1, "add", "0").replace(
        "  k = f32[] constant(0)\n  init = f32[6] broadcast(k), dimensions={}", "  init = f32[6] parameter(1)"),
             lambda rng: [_normal(6, 13)(rng), _normal(6)(rng)], "sum"),
    ScanCase("cumsum_not_associative", cumulative("cumsum_ordered", "f32", (3, 11), 1, "add", "0", reverse=True,
                                                  associative=False), lambda rng: [_normal(3, 11)(rng)], "sum"),
    ScanCase("cumprod_rows", cumulative("cumprod_rows", "f32", (5, 6), 1, "multiply", "1", swapped=True),
             lambda rng: [_scaled(5, 6)(rng)], "product"),
    ScanCase("cumprod_columns_reversed", cumulative("cumprod_cols", "f32", (5, 6), 0, "multiply", "1",
                                                    reverse=True), lambda rng: [_scaled(5, 6)(rng)], "product"),
    ScanCase("cummax_rows", cumulative("cummax_rows", "f32", (5, 6), 1, "maximum", "-inf"),
             lambda rng: [_normal(5, 6)(rng)]),
    ScanCase("cummax_columns_reversed", cumulative("cummax_cols", "f32", (5, 6), 0, "maximum", "-inf", reverse=True,
                                                   swapped=True), lambda rng: [_normal(5, 6)(rng)]),
    ScanCase("two_inputs_two_carries", TWO_INPUTS_TWO_CARRIES,
             lambda rng: [_ints(-9, 9, (3, 4), np.int32)(rng), _ints(-9, 9, (3, 4), np.int32)(rng),
                          _ints(-9, 9, (3,), np.int32)(rng), _ints(-9, 9, (3,), np.int32)(rng)]),
    ScanCase("no_carries", NO_CARRIES, lambda rng: [_normal(4, 3)(rng), _normal(4, 3)(rng)], "steps"),
    ScanCase("integer_cumulative", INTEGER_CUMULATIVE,
             lambda rng: [_ints(-1000, 1000, (6, 5), np.int32)(rng), _ints(-1000, 1000, (6,), np.int32)(rng),
                          _ints(-128, 128, (6, 5), np.int8)(rng)]),
    ScanCase("carry_only", CARRY_ONLY, lambda rng: [_f32(7)]),
    ScanCase("stacked_rank_2", STACKED_RANK_2, lambda rng: [_ints(-9, 9, (2, 3), np.float32)(rng),
                                                            _ints(-9, 9, (2,), np.float32)(rng)]),
    ScanCase("empty", EMPTY, lambda rng: [np.zeros((2, 0), np.float32), _f32([3, 4])], on_xla=False),
]


def allowed_error(case: ScanCase, args: list[np.ndarray], want: list[np.ndarray]) -> list[np.ndarray]:
    """How far another correct result may be from ``want``, element by element (module docstring)."""
    if case.rounding == "exact":
        return [np.zeros(np.shape(w)) for w in want]
    u = float(np.finfo(np.float32).eps) / 2  # unit roundoff of f32, the type of every float case
    if case.rounding == "steps":
        scan = case.scan()
        steps = scan.operand(0).shape.dimensions[int(scan.attr("dimensions")[0])]
        return [np.full(np.shape(w), 2 * steps * u * float(np.max(np.abs(w), initial=0))) for w in want]
    scan = case.scan()
    d, reverse = int(scan.attr("dimensions")[0]), bool(scan.attr("is_reverse"))
    x = np.abs(args[0].astype(np.float64))
    start = scan.operand(1)  # a broadcast constant, or a parameter: an init per row
    init = (np.expand_dims(np.abs(args[start.parameter_number].astype(np.float64)), d) if start.opcode == "parameter"
            else abs(float(start.operand(0).literal)))
    if reverse:
        x = np.flip(x, d)
    n = np.arange(2, x.shape[d] + 2).reshape([-1 if k == d else 1 for k in range(x.ndim)])  # init + x[0..k]
    gamma = n * u / (1 - n * u)
    terms = np.cumsum(x, axis=d) + init if case.rounding == "sum" else np.cumprod(x, axis=d) * init
    bound = 2 * gamma * terms
    if reverse:
        bound = np.flip(bound, d)
    last = np.take(bound, 0 if reverse else -1, axis=d)
    return [bound, last][:len(want)]


def assert_close(got: list[np.ndarray], want: list[np.ndarray], bounds: list[np.ndarray], what: str) -> None:
    """Same dtypes and shapes; every element within its bound (NaN where NaN is expected)."""
    assert len(got) == len(want), f"{what}: {len(got)} results, expected {len(want)}"
    for k, (g, w, b) in enumerate(zip(got, want, bounds, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what} result {k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if not np.any(b):
            np.testing.assert_array_equal(g, w, err_msg=f"{what} result {k}")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        ok = (np.abs(g64 - w64) <= b) | (g64 == w64) | (np.isnan(g64) & np.isnan(w64))
        assert np.all(ok), f"{what} result {k}: off by {np.max(np.abs(g64 - w64))}, allowed {b}\ngot  {g}\nwant {w}"
