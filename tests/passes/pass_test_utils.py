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
from xla_teach.hlo.parser import parse_hlo
from xla_teach.passes.pass_base import HloPass


def canonical(module: HloModule) -> str:
    text = module.to_text(long_form=False, print_metadata=False)
    return "\n".join(line for line in text.splitlines() if not line.startswith("HloModule"))


def random_inputs(module: HloModule, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for param in module.entry.parameter_instructions:
        shape = param.shape
        etype = shape.element_type
        if etype.is_float:
            args.append(rng.standard_normal(shape.dimensions).astype(etype.dtype))
        elif etype.is_pred:
            args.append(rng.integers(0, 2, shape.dimensions).astype(bool))
        else:
            info = np.iinfo(etype.dtype)
            lo, hi = max(info.min, -50), min(info.max, 50)
            args.append(rng.integers(lo, hi + 1, shape.dimensions).astype(etype.dtype))
    return args


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
