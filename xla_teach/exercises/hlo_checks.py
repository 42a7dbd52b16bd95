"""Checks shared by the pass exercises: run the student's pass, verify, compare results.

Every helper raises :class:`~xla_teach.exercises.grading.CaseFailed` with a message
that shows the module the solution got wrong, so the student can reproduce it::

    module = parse_hlo(text)          # the text from the feedback
    MyPass().run(module)
    print(module)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.exercises.grading import CaseFailed
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo

_LAYOUT = re.compile(r"\]\{[0-9,]*\}")


def strip_layouts(text: str) -> str:
    """``f32[2,3]{1,0}`` -> ``f32[2,3]``: the generated modules have no layouts, so feedback has none."""
    return _LAYOUT.sub("]", text)


def short_text(module: HloModule) -> str:
    """The module as the feedback prints it, close to the generated input: short form, no
    metadata, no layouts, no header attributes."""
    text = module.to_text(long_form=False, print_metadata=False).strip()
    lines = strip_layouts(text).splitlines()
    lines[0] = f"HloModule {module.name}"
    return "\n".join(lines)


def show(title: str, module: HloModule | str) -> str:
    text = module if isinstance(module, str) else short_text(module)
    return f"{title}:\n" + "\n".join("  " + line for line in text.strip().splitlines())


def run_student_pass(pass_class: Any, text: str) -> tuple[HloModule, HloModule, bool]:
    """Parse ``text``, run a fresh ``pass_class()`` on it; returns (original, rewritten, changed)."""
    original = parse_hlo(text)
    module = parse_hlo(text)
    hlo_pass = pass_class()
    changed = hlo_pass.run(module)
    if not isinstance(changed, bool | np.bool_):
        raise CaseFailed(f"run() must return True or False, but returned {changed!r}\n{show('on module', text)}")
    return original, module, bool(changed)


def module_from_student(after: object, text: str, what: str = "your pass") -> HloModule:
    """Parse the module text the student's process sent back (untrusted: anything may come)."""
    if not isinstance(after, str):
        raise CaseFailed(f"the grader got no module back from {what}\n{show('input', text)}")
    try:
        return parse_hlo(after)
    except Exception as err:  # noqa: BLE001 -- whatever the text is, the case fails with the reason
        raise CaseFailed(f"the module after {what} cannot be read back as HLO:\n  {err}\n{show('input', text)}") \
            from None


def student_pass(student: Any, entry: str, text: str) -> tuple[HloModule, HloModule, bool]:
    """Run the student's pass class ``entry`` on ``text`` in the student's process; returns
    (original, rewritten, changed), judged here from the module text it sends back."""
    result = student.call("run_pass", entry=entry, text=text)
    changed = result.get("changed") if isinstance(result, dict) else None
    if not isinstance(changed, bool):
        raise CaseFailed(f"run() must return True or False\n{show('on module', text)}")
    return parse_hlo(text), module_from_student(result.get("text"), text), changed


def check_verifies(module: HloModule, text: str) -> str:
    """The rewritten module must still be well formed; returns its short text."""
    from xla_teach.hlo.verifier import verify_module

    try:
        verify_module(module)
        after = short_text(module)
    except Exception as err:  # noqa: BLE001 -- a broken graph can fail in the verifier or the printer
        raise CaseFailed(f"the module is no longer valid HLO after your pass:\n  {err}\n{show('input', text)}") \
            from None
    return after


def check_reported_change(changed: bool, original: HloModule, module: HloModule, text: str) -> None:
    """``run()`` returns True exactly when the module text changed (as the pipeline checks)."""
    differs = short_text(original) != short_text(module)
    if changed != differs:
        claim = "True" if changed else "False"
        actual = "changed" if differs else "did not change"
        raise CaseFailed(f"run() returned {claim}, but the module {actual}: return True exactly when the pass "
                         f"changed something\n{show('input', text)}")


def fake_args(module: HloModule, seed: int, specials: bool = False) -> list[np.ndarray]:
    """Random arguments (floats normal, ints in [-9, 9]); ``specials`` mixes in inf, -inf and NaN."""
    rng = np.random.default_rng(seed)
    args = []
    for param in module.entry.parameter_instructions:
        shape = param.shape
        etype = shape.element_type
        dims = tuple(shape.dimensions)
        if etype.is_float:
            value = rng.standard_normal(dims).astype(etype.dtype)
            if specials and value.size:
                flat = value.reshape(-1)
                for i, special in enumerate((np.inf, -np.inf, np.nan)[: flat.size]):
                    flat[(i * 2) % flat.size] = special
        elif etype.is_pred:
            value = rng.random(dims) < 0.5
        else:
            value = rng.integers(-9, 10, dims).astype(etype.dtype)
        args.append(value)
    return args


EVALUATION_SLACK = 16  # a rewritten module may cost this many times its input to evaluate...
EVALUATION_FLOOR = 2e7  # ... or this many operations, whichever is more


def evaluation_cost(module: HloModule) -> float:
    """Roughly how many scalar operations the interpreter spends on ``module``: each instruction's
    elements, read and written, times what a dot or convolution sums per element. The grader runs
    a module a student's code returned only when this is a small multiple of its input's, so a
    returned 8000x8000 convolution fails its case instead of holding the grader for an hour."""

    def elements(shape: Any) -> float:
        if shape.is_tuple:
            return sum(elements(s) for s in shape.tuple_shapes)
        if shape.is_token:
            return 0.0
        return float(np.prod(shape.dimensions, dtype=np.float64)) if shape.dimensions else 1.0

    total = 0.0
    for comp in module.computations:
        for instr in comp.instructions:
            work = elements(instr.shape) + sum(elements(o.shape) for o in instr.operands)
            if instr.opcode == "dot" and instr.operands:
                lhs = instr.operands[0].shape.dimensions
                work *= max(1.0, float(np.prod([lhs[d] for d in instr.attrs.get("lhs_contracting_dims", [])],
                                               dtype=np.float64)))
            elif instr.opcode == "convolution" and len(instr.operands) == 2:  # kernel elements per output feature
                features = float(instr.shape.dimensions[-1]) if instr.shape.dimensions else 1.0
                work *= max(1.0, elements(instr.operands[1].shape) / max(1.0, features))
            total += work
    return total


def check_same_results(original: HloModule, module: HloModule, text: str, seeds: Sequence[int] = (0, 1),
                       specials: bool = False, after_text: str = "") -> None:
    """Both modules compute the same on random inputs (the interpreter is the oracle)."""
    from xla_teach.hlo.evaluator import evaluate_module
    from xla_teach.tools.tool_support import compare_outputs, format_literal

    limit = max(EVALUATION_SLACK * evaluation_cost(original), EVALUATION_FLOOR)
    if evaluation_cost(module) > limit:
        raise CaseFailed(f"the module your pass produced would take the grader too long to run: about "
                         f"{evaluation_cost(module):.3g} operations, where the input module needs "
                         f"{evaluation_cost(original):.3g}\n{show('input', text)}")
    for seed in seeds:
        args = fake_args(original, seed, specials)
        expected = evaluate_module(original, args)
        try:
            got = evaluate_module(module, args)
        except Exception as err:  # noqa: BLE001
            raise CaseFailed(f"the interpreter cannot run the module your pass produced: {err}\n"
                             f"{show('input', text)}\n{show('after your pass', after_text or module)}") from None
        for comparison in compare_outputs(got, expected, 1e-6, 1e-6):
            if not comparison.ok:
                inputs = "\n".join(f"  arg{i} = {format_literal(a)}" for i, a in enumerate(args))
                raise CaseFailed(
                    f"the module computes something else after your pass:\n  {comparison.describe('got', 'expected')}"
                    f"\n  on inputs:\n{inputs}\n{show('input', text)}\n{show('after your pass', after_text or module)}")


def names(instrs: Sequence[HloInstruction] | Any) -> set[str]:
    return {i.name for i in instrs}


def format_names(found: set[str]) -> str:
    return ", ".join(sorted(found))
