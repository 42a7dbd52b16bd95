"""Emitting a small scalar computation inline: reducers, comparators, combiners.

``reduce(x, 0), to_apply=add`` calls its ``add`` computation once per element.
Rather than a function call, its instructions are emitted right where they are
needed, with the parameters bound to LLVM values -- the same elemental emitter
runs over scalar "indices". Variadic reducers return tuples; the result is the
list of the root tuple's elements.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.ir_array import IrIndex
from xla_teach.hlo.ir import HloComputation


def emit_scalar_computation(b: ir.IRBuilder, comp: HloComputation, args: list[ir.Value],
                            reassociate: bool = False) -> list[ir.Value]:
    """Values of ``comp``'s root (flattened if it is a tuple) for scalar ``args``.

    ``reassociate`` marks float adds/multiplies as reorderable so that reduction
    loops vectorize (XLA allows reductions to be reassociated).
    """
    from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter

    params = comp.parameter_instructions
    if len(params) != len(args):
        raise ValueError(f"{comp.name} takes {len(params)} scalars, got {len(args)}")
    gens = {p.unique_id: (lambda index, v=v: v) for p, v in zip(params, args, strict=True)}
    emitter = ElementalEmitter(b, gens, reassociate=reassociate)
    root = comp.root
    elements = list(root.operands) if root.opcode == "tuple" else [root]
    values = []
    for element in elements:
        if not element.shape.is_array or element.shape.rank != 0:
            raise NotImplementedError(f"{comp.name}: only scalar computations can be emitted inline")
        values.append(emitter.value_at(element, IrIndex.scalar(element.shape)))
    return values
