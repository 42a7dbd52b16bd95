"""Fake arguments for a module (``--use_fake_data`` of replay / run-hlo-module).

Like XLA's ``MakeFakeArguments``: one array per ENTRY parameter with the parameter's shape and
type, from a seeded generator so a run can be repeated.  Floats are drawn from a standard normal
(well inside every op's domain-safe range for the common cases), integers from a small range
``[0, 8)`` -- small enough to be valid indices for gather and dynamic-slice, whose indices XLA
clamps anyway -- and ``pred`` from a fair coin.
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.shape import Shape


def fake_array(shape: Shape, rng: np.random.Generator) -> np.ndarray | tuple:
    """A random value of ``shape`` (a tuple shape gives a tuple of arrays)."""
    if shape.is_tuple:
        return tuple(fake_array(s, rng) for s in shape.tuple_shapes)
    ptype = shape.element_type
    dims = tuple(shape.dimensions)
    if ptype.is_pred:
        return rng.random(dims) < 0.5
    if ptype.is_float:
        return rng.standard_normal(dims).astype(ptype.dtype)
    return rng.integers(0, 8, dims).astype(ptype.dtype)


def fake_arguments(module: HloModule, seed: int = 0) -> list[np.ndarray]:
    """One fake array per ENTRY parameter, in parameter-number order."""
    rng = np.random.default_rng(seed)
    return [fake_array(p.shape, rng) for p in module.entry.parameter_instructions]  # type: ignore[misc]


def fill_elided_constants(module: HloModule, seed: int = 0) -> list[str]:
    """Give every constant that the text printed as ``{...}`` a made-up value of its shape, in
    place; returns their names. XLA's dumps elide constants of more than ten elements, so such a
    module cannot *run* -- but it can still be *compiled*, to look at what the compiler does with
    it (the explorer, ``xla-teach diff``). The values are fake: constant folding folds them, so
    the numbers a run gives mean nothing, while the passes, fusions and buffers are the module's."""
    rng = np.random.default_rng(seed)
    filled = []
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "constant" and instr.attrs.get("literal_elided"):
                instr.attrs["literal"] = fake_array(instr.shape, rng)
                del instr.attrs["literal_elided"]
                filled.append(instr.name)
    return filled
