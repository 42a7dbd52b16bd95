"""Oracles for the float elementwise corpus modules: ``float_unary``, ``float_binary`` and
``compare_select_logic``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tests.hlo.corpus_oracles.common import BF16, F16, F32, F64, Oracle, f32, normal, via_f64

_erf = np.vectorize(math.erf, otypes=[F64])


def round_afz(x: np.ndarray) -> np.ndarray:
    """Ties away from zero; computed in f64 so |x| + 0.5 is exact (0.49999997 stays < 1)."""
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def sign(x: np.ndarray) -> np.ndarray:
    """-1/+1, with zeros (and their sign) and NaN passed through."""
    return np.where(x == 0, x, np.sign(x))


def logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


# The float unary ops: HLO opcode suffix used in the corpus names -> an f64 NumPy function.
UNARY = {
    "abs": np.abs, "negate": np.negative, "floor": np.floor, "ceil": np.ceil, "afz": round_afz,
    "even": np.rint, "sign": sign, "exp": np.exp, "expm1": np.expm1, "tanh": np.tanh,
    "logistic": logistic, "erf": _erf, "sine": np.sin, "cosine": np.cos, "tan": np.tan,
    "sqrt": np.sqrt, "rsqrt": rsqrt, "log": np.log, "log1p": np.log1p, "cbrt": np.cbrt,
}


def _unary_all(prefix: str, x: np.ndarray, ops: Sequence[str]) -> dict[str, np.ndarray]:
    return {f"{prefix}.{op}": via_f64(UNARY[op], x) for op in ops}


# ---- float_unary -------------------------------------------------------------------------
def float_unary_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    k = np.concatenate([normal(rng, 4, F16), np.array([np.inf, np.nan], F16)])
    return [normal(rng, 16) * np.float32(2), normal(rng, 8, BF16), normal(rng, 8, F64), k]


def float_unary_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, b, e, k = args
    h = f32([-2.5, -1.5, -0.5, -0.49999997, -0.0, 0, 0.49999997, 0.5, 1.5, 2.5, 3.7, -3.7, np.inf, np.nan])
    d = f32([-8, -1, -0.0, 0, 1e-30, 0.25, 4, 27, np.inf, np.nan])
    want = _unary_all("h", h, ["abs", "negate", "floor", "ceil", "afz", "even", "sign", "exp", "expm1", "tanh",
                               "logistic", "erf", "sine", "cosine", "tan"])
    want["h.finite"] = np.isfinite(h)
    want |= _unary_all("d", d, ["sqrt", "rsqrt", "log", "log1p", "cbrt"])
    want |= _unary_all("x", x, ["abs", "negate", "exp", "expm1", "tanh", "logistic", "erf", "sine", "cosine",
                                "cbrt", "floor", "ceil", "afz", "even", "sign"])
    ax = np.abs(x)
    want |= {f"x.{op}": via_f64(UNARY[op], ax) for op in ["sqrt", "rsqrt", "log", "log1p"]}
    want["x.tan"] = via_f64(np.tan, x * np.float32(0.25))
    want |= _unary_all("b", b, ["exp", "tanh", "logistic", "even"])
    want["b.sqrt"] = via_f64(np.sqrt, np.abs(b))
    want |= _unary_all("e", e, ["exp", "sine", "erf", "cbrt"])
    want["e.log1p"] = np.log1p(np.abs(e))
    want["k.cosine"], want["k.expm1"] = via_f64(np.cos, k), via_f64(np.expm1, k)
    want["k.finite"] = np.isfinite(k)
    return want


# ---- float_binary ------------------------------------------------------------------------
def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN if either is NaN; of two zeros, -0 only when both are -0."""
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0), np.maximum(a, b))


def minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN if either is NaN; of two zeros, +0 only when both are +0."""
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0), np.minimum(a, b))


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "remainder": np.fmod,
    "maximum": maximum, "minimum": minimum, "power": np.power, "atan2": np.arctan2,
}


def float_binary_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    x, y = normal(rng, 16), normal(rng, 16)
    x[:4], y[:4] = [0.0, -0.0, np.nan, 0.0], [-0.0, 0.0, 1.0, 0.0]  # signed zeros and NaN in max/min
    h, k = normal(rng, 8, F16), normal(rng, 8, F16)
    return [x, y, h, k, normal(rng, 8, F64), normal(rng, 8, F64)]


def float_binary_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, y, h, k, d, e = args
    a = f32([1, -1, 5.5, -5.5, 0, -0.0, np.inf, np.nan, 2, -8, 0, 3])
    b = f32([0, 0, np.inf, 2, -0.0, 0, 1, 1, -0.5, 0.333333343, 0, np.nan])
    want = {op: via_f64(fn, a, b) for op, fn in BINARY.items()}
    want |= {f"x.{op}": via_f64(fn, x, y) for op, fn in BINARY.items() if op != "power"}
    want["x.power"] = via_f64(np.power, np.abs(x), y)
    want |= {f"h.{op}": via_f64(BINARY[op], h, k) for op in ["add", "multiply", "divide", "maximum"]}
    with np.errstate(all="ignore"):
        want |= {"d.subtract": d - e, "d.atan2": np.arctan2(d, e), "d.power": np.power(np.abs(d), e),
                 "d.remainder": np.fmod(d, e)}
    return want


# ---- compare_select_logic ----------------------------------------------------------------
def total_order_key(x: np.ndarray) -> np.ndarray:
    """An int32 key ordering f32 values as TOTALORDER does: negative floats have their
    magnitude bits flipped, so -NaN < -inf < -1 < -0 < +0 < 1 < inf < NaN."""
    bits = np.asarray(x, F32).view(np.int32)
    return np.where(bits < 0, bits ^ np.int32(0x7FFFFFFF), bits)


def compare_select_logic_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    p, q = rng.random(8) < 0.5, rng.random(8) < 0.5
    x, y = normal(rng, 8), normal(rng, 8)
    m, n = rng.integers(-20, 20, 8).astype(np.int32), rng.integers(-20, 20, 8).astype(np.int32)
    n[:2] = m[:2]  # some equal pairs for EQ/NE
    w = rng.integers(0, 256, 8).astype(np.uint8)
    return [p, q, x, y, m, n, np.array(run == 0), w]


def compare_select_logic_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    p, q, x, y, m, n, t, w = args
    a = f32([-np.inf, -1, -0.0, 0, 1, np.inf, np.nan, 2, -np.nan])
    b = f32([-np.inf, 1, 0, -0.0, 1, np.nan, np.nan, -2, 3])
    ka, kb = total_order_key(a), total_order_key(b)
    i = np.array([-5, -1, 0, 3, 2**31 - 1, -(2**31)], np.int32)
    j = np.array([3, -1, 0, -3, -(2**31), 2**31 - 1], np.int32)
    u = np.array([4294967291, 4294967295, 0, 3, 2147483647, 2147483648], np.uint32)
    v = np.array([3, 4294967295, 0, 4294967293, 2147483648, 2147483647], np.uint32)
    c = f32([np.nan, 3, -3, 0.25])
    lo, hi = np.float32(-0.5), np.float32(0.5)
    x_gt = x > y
    x_max = np.where(x_gt, x, y)
    return {
        "eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
        "tot.lt": ka < kb, "tot.eq": ka == kb, "tot.ge": ka >= kb,
        "s.lt": i < j, "s.ge": i >= j, "u.lt": u < v, "u.ne": u != v,
        "p.and": p & q, "p.or": p | q, "p.xor": p ^ q, "p.not": ~p, "p.lt": ~p & q,
        "x.gt": x_gt, "x.le": total_order_key(x) <= total_order_key(y), "x.select": np.where(p, x, y),
        "x.max": x_max, "x.clamp": np.minimum(np.maximum(x, lo), hi), "y.clamp": np.minimum(np.maximum(y, x), x_max),
        "c.clamp": np.minimum(np.maximum(c, lo), hi),
        "m.and": m & n, "m.or": m | n, "m.xor": m ^ n, "m.not": ~m, "m.ne": m != n, "m.eq": m == n,
        "m.clamp": np.clip(m, 3, 6).astype(np.int32), "m.select": m if t else n,
        "w.not": ~w, "w.xor": np.full(8, 255, np.uint8),
    }


ORACLES = {
    "float_unary": Oracle(float_unary_inputs, float_unary_expected),
    "float_binary": Oracle(float_binary_inputs, float_binary_expected),
    "compare_select_logic": Oracle(compare_select_logic_inputs, compare_select_logic_expected, runs=2),
}
