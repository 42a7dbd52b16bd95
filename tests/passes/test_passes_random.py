"""Random modules (tests/hypothesis_modules.py) through every pass and the full pipelines: the
interpreter must give the same results before and after, and the verifier must accept the result.

The single-pass test is parametrized over every pass of the default pipeline and of the CPU
pipeline, discovered by walking the pipeline objects, so a pass added to either is tested
without touching this file. Each pass runs inside a one-pass :class:`HloPassPipeline`, which
also verifies the module and checks that the pass's ``changed`` answer is true.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.hypothesis_modules import (
    FLOAT_BINARY,
    FLOAT_UNARY,
    INT_BINARY,
    INT_UNARY,
    OTHER_ELEMENTWISE_OPCODES,
    SIGNED_UNARY,
    hlo_modules,
)
from tests.passes.pass_test_utils import random_inputs, special_inputs
from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.hlo.builder import XlaBuilder
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.opcodes import ELEMENTWISE_KINDS, OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module
from xla_teach.passes.lowering.tree_reduction_rewriter import TreeReductionRewriter
from xla_teach.passes.pass_base import HloPass, HloPassPipeline, PassOptions
from xla_teach.passes.pipeline import default_pipeline, simplification_passes

# Special inputs put 1e30 into f16 (it becomes inf, as intended), and bitcast-convert makes
# signalling NaNs, whose widening NumPy reports as an invalid cast.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning",
                                        "ignore:invalid value encountered in cast:RuntimeWarning")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PIPELINES: dict[str, Callable[[], HloPassPipeline]] = {"default": default_pipeline, "cpu": cpu_pipeline}

# Passes that only make sense after others ran (as they do in the pipeline): these run first.
PREREQUISITES: dict[str, tuple[str, ...]] = {"multi_output_fusion": ("fusion",)}
# Passes whose thresholds are tuned for large arrays get settings that fire on small modules.
SMALL_MODULE_VARIANTS: dict[str, Callable[[], HloPass]] = {
    "tree_reduction_rewriter": lambda: TreeReductionRewriter(parts=3, max_kept=4, min_reduced=2),
}


def _leaves(pipeline: HloPassPipeline) -> Iterator[HloPass]:
    """The passes of ``pipeline`` in run order, nested pipelines flattened."""
    for p in pipeline.passes:
        if isinstance(p, HloPassPipeline):
            yield from _leaves(p)
        else:
            yield p


def _pass_names() -> list[str]:
    names: dict[str, None] = {}
    for make in PIPELINES.values():
        names.update((p.name, None) for p in _leaves(make()))
    return list(names)


def fresh_pass(name: str) -> HloPass:
    """A new instance of the pass called ``name``, taken from a freshly built pipeline."""
    if name in SMALL_MODULE_VARIANTS:
        return SMALL_MODULE_VARIANTS[name]()
    for make in PIPELINES.values():
        for p in _leaves(make()):
            if p.name == name:
                return p
    raise KeyError(f"no pipeline has a pass named '{name}'")


def _tolerance(dtype: np.dtype) -> dict[str, float]:
    """f16 rounds every op to 11 bits (bf16 to 8), so a reassociated sum or a refolded constant
    may differ in its last bits; integers and pred must match exactly. (ml_dtypes' bf16 and fp8
    types are not of NumPy's float kind: they are named here.)"""
    if dtype == np.float16:
        return {"rtol": 2e-2, "atol": 2e-2}
    if dtype.name == "bfloat16" or dtype.name.startswith("float8"):
        return {"rtol": 1e-1, "atol": 1e-1}
    if dtype.kind == "f":
        return {"rtol": 1e-4, "atol": 1e-6}
    return {"rtol": 0, "atol": 0}


def _assert_results_match(before: HloModule, after: HloModule, args: list) -> None:
    want, got = evaluate_module(before, args), evaluate_module(after, args)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        w, g = np.asarray(w), np.asarray(g)
        assert w.dtype == g.dtype and w.shape == g.shape, f"{w.dtype}{w.shape} became {g.dtype}{g.shape}"
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), equal_nan=True,
                                   err_msg=f"\n--- before\n{before.to_text()}\n--- after\n{after.to_text()}",
                                   **_tolerance(w.dtype))


def _check(original: HloModule, optimize: Callable[[HloModule], object]) -> None:
    module = original.clone()
    optimize(module)
    verify_module(module)
    _assert_results_match(original, module, random_inputs(original))
    # NaN, infinities, -0.0 and integer extremes too (signed zeros compare equal here).
    _assert_results_match(original, module, special_inputs(original))


def _run_alone(name: str, module: HloModule) -> None:
    """Prerequisites, then the pass in a one-pass pipeline (verifier + honest ``changed``)."""
    for prerequisite in PREREQUISITES.get(name, ()):
        fresh_pass(prerequisite).run(module)
    HloPassPipeline(f"only-{name}", [fresh_pass(name)]).run(module, PassOptions(record=False, check_reported_changes=True))


# Modules on which the random tests once caught a pass, kept as fixed examples.
REGRESSIONS: dict[str, tuple[str, str]] = {
    # reshape-mover reshaped clamp's scalar bounds to the operand's shape (a ShapeError).
    "reshape-mover-clamp-scalar-bounds": ("reshape-mover", """HloModule m
ENTRY main {
  p0 = f32[2,3] parameter(0)
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  r = f32[3,2] reshape(p0)
  ROOT c = f32[3,2] clamp(lo, r, hi)
}"""),
    "reshape-mover-clamp-transposed": ("reshape-mover", """HloModule m
ENTRY main {
  p0 = s32[2,3] parameter(0)
  lo = s32[] constant(-1)
  t = s32[3,2] transpose(p0), dimensions={1,0}
  ROOT c = s32[3,2] clamp(lo, t, lo)
}"""),
}


@pytest.mark.parametrize("case", sorted(REGRESSIONS))
def test_regressions_found_by_random_modules(case: str) -> None:
    pass_name, text = REGRESSIONS[case]
    module = parse_hlo(text)
    _check(module, lambda m: _run_alone(pass_name, m))


@pytest.mark.parametrize("pass_name", _pass_names())
@SETTINGS
@given(module=hlo_modules())
def test_single_pass_preserves_results(pass_name: str, module: HloModule) -> None:
    _check(module, lambda m: _run_alone(pass_name, m))


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
@SETTINGS
@given(module=hlo_modules())
def test_full_pipeline_preserves_results(pipeline: str, module: HloModule) -> None:
    _check(module, lambda m: PIPELINES[pipeline]().run(m, PassOptions(record=False, check_reported_changes=True)))


@SETTINGS
@given(module=hlo_modules())
def test_simplification_reaches_a_fixed_point(module: HloModule) -> None:
    """After the pipeline's simplification, running every simplifier once more changes nothing."""
    module = module.clone()
    pipeline = default_pipeline()
    pipeline.find("optimization").run(module, PassOptions(record=False, check_reported_changes=True))
    for p in simplification_passes():
        assert not p.run(module), f"{p.name} still changed the module: {p.notes}"


def test_pass_discovery_finds_every_pass_and_the_tables_are_current() -> None:
    names = _pass_names()
    for expected in ("algsimp", "fusion", "multi_output_fusion", "simplify-while-loops", "row-fusion",
                     "tree_reduction_rewriter", "reshape-to-bitcast", "dot-strategy", "hlo-memory-scheduler"):
        assert expected in names
    stale = (set(PREREQUISITES) | set(SMALL_MODULE_VARIANTS) | {q for qs in PREREQUISITES.values() for q in qs})
    assert stale <= set(names), f"tables name passes no pipeline has: {sorted(stale - set(names))}"


def test_generator_covers_every_elementwise_opcode() -> None:
    """The generator's op tables (plus its compare/select/clamp/convert/... steps) make every
    elementwise opcode of the opcode table, so a new opcode cannot slip past the random tests."""
    b = XlaBuilder("coverage")
    made = set(OTHER_ELEMENTWISE_OPCODES)
    for number, (etype, unary, binary) in enumerate((("f32", FLOAT_UNARY, FLOAT_BINARY),
                                                     ("s32", INT_UNARY + SIGNED_UNARY, INT_BINARY))):
        x = b.parameter(number, Shape.scalar(etype))
        made |= {getattr(b, name)(x).instruction.opcode for name in unary}
        made |= {getattr(b, name)(x, x).instruction.opcode for name in binary}
    table = {op for op, info in OPCODES.items() if info.kind in ELEMENTWISE_KINDS}
    assert made == table, f"not generated: {sorted(table - made)}; not elementwise: {sorted(made - table)}"
