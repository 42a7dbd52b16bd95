"""Before/Expected testing of passes, in the spirit of XLA's and TVM's pass tests.

``check_pass(SomePass(), BEFORE, EXPECTED)`` parses BEFORE, runs the pass, and
compares the result with EXPECTED after printing both the same canonical way
(short form, no metadata). ``EXPECTED=None`` means the pass must report no
change. Then both modules run on the interpreter with the same random inputs
and must agree. On a mismatch all three texts are printed.
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import HloPass


def canonical(module: HloModule) -> str:
    text = module.to_text(long_form=False, print_metadata=False)
    return "\n".join(line for line in text.splitlines() if not line.startswith("HloModule"))


def random_value(shape: Shape, rng: np.random.Generator) -> object:
    """A random array for ``shape`` (a tuple of them for a tuple shape): normal floats,
    integers in [-50, 50], random predicates."""
    if shape.is_tuple:
        return tuple(random_value(s, rng) for s in shape.tuple_shapes)
    etype = shape.element_type
    if etype.is_float:
        return rng.standard_normal(shape.dimensions).astype(etype.dtype)
    if etype.is_pred:
        return rng.integers(0, 2, shape.dimensions).astype(bool)
    info = np.iinfo(etype.dtype)
    lo, hi = max(info.min, -50), min(info.max, 50)
    return rng.integers(lo, hi + 1, shape.dimensions).astype(etype.dtype)


def random_inputs(module: HloModule, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [random_value(param.shape, rng) for param in module.entry.parameter_instructions]


def assert_same_results(before: HloModule, after: HloModule, seed: int = 0, rtol: float = 1e-5) -> None:
    from xla_teach.hlo.evaluator import evaluate_module

    args = random_inputs(before, seed)
    expected = evaluate_module(before, args)
    actual = evaluate_module(after, args)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual, strict=True):
        assert e.shape == a.shape and e.dtype == a.dtype
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(e, np.float64), rtol=rtol, atol=1e-6,
                                   equal_nan=True)


def check_pass(hlo_pass: HloPass, before: str, expected: str | None, semantics: bool = True) -> HloModule:
    original = parse_hlo(before)
    module = original.clone()
    changed = hlo_pass.run(module)
    got = canonical(module)
    if expected is None:
        assert not changed, f"{hlo_pass.name} should not change:\n{before}\nbut produced:\n{got}"
        assert got == canonical(original)
        return module
    want = canonical(parse_hlo(expected))
    assert changed, f"{hlo_pass.name} reported no change on:\n{before}"
    assert got == want, f"\n--- before\n{before}\n--- after {hlo_pass.name}\n{got}\n--- expected\n{want}"
    if semantics:
        assert_same_results(original, module)
    return module


# ---- special values: NaN, infinities, signed zeros, integer extremes ---------------------------
FLOAT_SPECIALS = (np.nan, -np.inf, np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, 2.0, -3.25, 1e30, -1e-30)


def special_inputs(module: HloModule, shift: int = 0) -> list[np.ndarray]:
    """Inputs made of the values rewrites get wrong: NaN, +-inf, -0.0, integer min/max.
    ``shift`` rotates the pattern so two parameters do not always line up the same way."""
    args = []
    for k, param in enumerate(module.entry.parameter_instructions):
        shape = param.shape
        etype = shape.element_type
        if etype.is_float:
            pool = np.array(FLOAT_SPECIALS, dtype=np.float64)
        elif etype.is_pred:
            pool = np.array([True, False, False])
        else:
            info = np.iinfo(etype.dtype)
            values = [max(int(info.min), min(int(info.max), v)) for v in (0, 1, -1, info.min, info.max, 7, -8)]
            pool = np.array(values, dtype=etype.dtype)  # exact: no detour through float64
        n = int(np.prod(shape.dimensions))
        idx = (np.arange(n) * (k + 1) + shift) % len(pool)
        with np.errstate(over="ignore"):  # 1e30 becomes inf in f16: one more special value
            args.append(pool[idx].astype(etype.dtype).reshape(shape.dimensions))
    return args


def assert_bitwise_same(before: HloModule, after: HloModule, shifts: int = 4, signed_zero_ok: bool = False) -> None:
    """Both modules give bit-identical results (NaN == NaN, but -0.0 != +0.0 unless
    ``signed_zero_ok``) on special inputs."""
    from xla_teach.hlo.evaluator import evaluate_module

    for shift in range(shifts):
        args = special_inputs(before, shift)
        for e, a in zip(evaluate_module(before, args), evaluate_module(after, args), strict=True):
            e, a = np.asarray(e), np.asarray(a)
            assert e.dtype == a.dtype and e.shape == a.shape
            if e.dtype.kind in "fV":  # floats, including ml_dtypes' bfloat16
                same = (e.view(f"u{e.itemsize}") == a.view(f"u{a.itemsize}")) | (np.isnan(e) & np.isnan(a))
                if signed_zero_ok:
                    same |= (e == 0) & (a == 0)
            else:
                same = e == a
            assert np.all(same), f"results differ on special inputs {args}:\nbefore {e}\nafter  {a}"
