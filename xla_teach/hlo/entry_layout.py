"""The ENTRY's layout as the caller sees it: ``entry_computation_layout`` in the module header.

The header records the parameter and result shapes (with layouts) of the ENTRY computation, e.g.
``entry_computation_layout={(f32[4,3]{0,1})->f32[4]{0}}``. A pass may change the ENTRY after the
header was written; these helpers check the record still fits and say which shapes to print.
Both the printer and the verifier use them, so they live below both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_teach.hlo.errors import shape_text

if TYPE_CHECKING:
    from xla_teach.hlo.ir import HloModule
    from xla_teach.hlo.shape import Shape


def entry_layout_problems(module: HloModule) -> list[str]:
    """``entry_computation_layout`` must describe the ENTRY: one shape per parameter and
    the result, each with the same element type and dimensions (layouts may differ: they
    say how the caller's buffers are laid out). XLA's verifier checks the same."""
    recorded = module.entry_computation_layout
    entry = module.entry_computation
    if recorded is None or entry is None or entry.root_instruction is None:
        return []
    params, result = recorded
    own = [p.shape for p in sorted(entry.parameter_instructions, key=lambda p: p.parameter_number)]
    what = "entry_computation_layout"
    if len(params) != len(own):
        return [f"{what} lists {len(params)} parameters but ENTRY %{entry.name} has {len(own)}"]
    problems = [f"{what}: parameter {i} is {shape_text(want)} but ENTRY parameter {i} is {shape_text(got)}"
                for i, (want, got) in enumerate(zip(params, own, strict=True)) if not want.compatible(got)]
    if not result.compatible(entry.root.shape):
        problems.append(f"{what}: the result is {shape_text(result)} but the ENTRY root is "
                        f"{shape_text(entry.root.shape)}")
    return problems


def entry_layout_shapes(module: HloModule) -> tuple[tuple[Shape, ...], Shape]:
    """Parameter and result shapes the caller sees: the module's recorded
    ``entry_computation_layout`` when it still fits the ENTRY, else the ENTRY's own shapes."""
    entry = module.entry
    recorded = module.entry_computation_layout
    if recorded is not None and not entry_layout_problems(module):
        return recorded
    return tuple(p.shape for p in entry.parameter_instructions), entry.root.shape
