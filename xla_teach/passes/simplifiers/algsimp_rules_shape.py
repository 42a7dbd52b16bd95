"""``algsimp`` rules for data movement: no-op removal and merging of chains.

All of these only move or relabel elements, so they are exact for every value.
"""

from __future__ import annotations

from xla_teach.hlo.attributes import SliceDim
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.passes.rewrite_utils import (
    add_instruction,
    broadcast_scalar,
    is_identity_permutation,
)
from xla_teach.passes.simplifiers.algsimp_rules_base import Rule, rule


def _same_dims(a: HloInstruction, b: HloInstruction) -> bool:
    return a.shape.dimensions == b.shape.dimensions


def _comp(instr: HloInstruction) -> HloComputation:
    assert instr.parent is not None
    return instr.parent


# ---- no-ops --------------------------------------------------------------------------------
@rule("reshape(x) -> x when the dimensions do not change", "reshape")
def noop_reshape(instr: HloInstruction) -> HloInstruction | None:
    return instr.operand(0) if _same_dims(instr, instr.operand(0)) else None


@rule("transpose(x), dimensions={0,1,..} -> x", "transpose")
def noop_transpose(instr: HloInstruction) -> HloInstruction | None:
    return instr.operand(0) if is_identity_permutation(instr.dimensions) else None


@rule("broadcast(x) -> x when it adds no dimension", "broadcast")
def noop_broadcast(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    if _same_dims(instr, operand) and is_identity_permutation(instr.dimensions):
        return operand
    return None


@rule("convert(x) -> x when the element type does not change", "convert")
def noop_convert(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    return operand if operand.shape.element_type is instr.shape.element_type else None


@rule("slice(x) -> x when it keeps everything", "slice")
def noop_slice(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    full = all(d.start == 0 and d.stride == 1 and d.limit == size
               for d, size in zip(instr.attr("slice"), operand.shape.dimensions, strict=True))
    return operand if full else None


@rule("pad(x, v) -> x when all padding is zero", "pad")
def noop_pad(instr: HloInstruction) -> HloInstruction | None:
    if all(p.low == 0 and p.high == 0 and p.interior == 0 for p in instr.attr("padding")):
        return instr.operand(0)
    return None


@rule("copy(x) -> x (same layout; before layout assignment a copy does nothing)", "copy")
def noop_copy(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    return operand if operand.shape == instr.shape else None


@rule("concatenate(x) -> x; zero-sized operands dropped", "concatenate")
def concatenate_trivial(instr: HloInstruction) -> HloInstruction | None:
    if instr.operand_count == 1:
        return instr.operand(0)
    (dim,) = instr.dimensions
    nonempty = [o for o in instr.operands if o.shape.dimensions[dim] != 0]
    if len(nonempty) == instr.operand_count or not nonempty:
        return None
    if len(nonempty) == 1:
        return nonempty[0]
    return add_instruction(_comp(instr), "concatenate", nonempty, {"dimensions": (dim,)})


@rule("reverse(x) -> x when every reversed dimension has size 1", "reverse")
def noop_reverse(instr: HloInstruction) -> HloInstruction | None:
    operand = instr.operand(0)
    return operand if all(operand.shape.dimensions[d] <= 1 for d in instr.dimensions) else None


@rule("transpose(x) -> reshape(x) when it only moves size-1 dimensions", "transpose")
def transpose_is_reshape(instr: HloInstruction) -> HloInstruction | None:
    dims = instr.operand(0).shape.dimensions
    moved = [d for d in instr.dimensions if dims[d] != 1]
    if moved != sorted(moved) or is_identity_permutation(instr.dimensions):
        return None
    return add_instruction(_comp(instr), "reshape", [instr.operand(0)], result_dims=instr.shape.dimensions)


# ---- chains ------------------------------------------------------------------------------------
@rule("reshape(reshape(x)) -> reshape(x)", "reshape")
def reshape_reshape(instr: HloInstruction) -> HloInstruction | None:
    inner = instr.operand(0)
    if inner.opcode != "reshape":
        return None
    source = inner.operand(0)
    if _same_dims(source, instr):
        return source
    return add_instruction(_comp(instr), "reshape", [source], result_dims=instr.shape.dimensions)


@rule("reshape/transpose(broadcast(scalar)) -> broadcast(scalar)", "reshape", "transpose")
def reshape_of_scalar_broadcast(instr: HloInstruction) -> HloInstruction | None:
    inner = instr.operand(0)
    if inner.opcode != "broadcast" or inner.operand(0).shape.rank != 0:
        return None
    return broadcast_scalar(_comp(instr), inner.operand(0), instr.shape.dimensions)


@rule("transpose(transpose(x)) -> transpose(x) with the composed permutation (or x)", "transpose")
def transpose_transpose(instr: HloInstruction) -> HloInstruction | None:
    inner = instr.operand(0)
    if inner.opcode != "transpose":
        return None
    composed = tuple(inner.dimensions[d] for d in instr.dimensions)
    source = inner.operand(0)
    if is_identity_permutation(composed):
        return source
    return add_instruction(_comp(instr), "transpose", [source], {"dimensions": composed})


@rule("broadcast(broadcast(x)) -> broadcast(x) with composed dimensions", "broadcast")
def broadcast_broadcast(instr: HloInstruction) -> HloInstruction | None:
    inner = instr.operand(0)
    if inner.opcode != "broadcast":
        return None
    composed = tuple(instr.dimensions[d] for d in inner.dimensions)
    return add_instruction(_comp(instr), "broadcast", [inner.operand(0)], {"dimensions": composed},
                           result_dims=instr.shape.dimensions)


@rule("slice(slice(x)) -> slice(x) with composed start/limit/stride", "slice")
def slice_slice(instr: HloInstruction) -> HloInstruction | None:
    inner = instr.operand(0)
    if inner.opcode != "slice":
        return None
    composed = []
    for outer_dim, inner_dim, size in zip(instr.attr("slice"), inner.attr("slice"), instr.shape.dimensions,
                                          strict=True):
        start = inner_dim.start + outer_dim.start * inner_dim.stride
        stride = inner_dim.stride * outer_dim.stride
        limit = start + (size - 1) * stride + 1 if size > 0 else start
        composed.append(SliceDim(start, limit, stride))
    return add_instruction(_comp(instr), "slice", [inner.operand(0)], {"slice": tuple(composed)})


@rule("slice(concatenate(a, b, ...)) -> b when the slice is exactly one operand", "slice")
def slice_of_concatenate(instr: HloInstruction) -> HloInstruction | None:
    concat = instr.operand(0)
    if concat.opcode != "concatenate":
        return None
    (dim,) = concat.dimensions
    dims = instr.attr("slice")
    if any(d.stride != 1 for d in dims):
        return None
    if any(d.start != 0 or d.limit != size
           for i, (d, size) in enumerate(zip(dims, concat.shape.dimensions, strict=True)) if i != dim):
        return None
    offset = 0
    for operand in concat.operands:
        size = operand.shape.dimensions[dim]
        if dims[dim].start == offset and dims[dim].limit == offset + size:
            return operand
        offset += size
    return None


@rule("reverse(reverse(x)) -> x (same dimensions)", "reverse")
def reverse_reverse(instr: HloInstruction) -> HloInstruction | None:
    inner = instr.operand(0)
    if inner.opcode == "reverse" and sorted(inner.dimensions) == sorted(instr.dimensions):
        return inner.operand(0)
    return None


SHAPE_RULES: tuple[Rule, ...] = (
    noop_reshape, noop_transpose, noop_broadcast, noop_convert, noop_slice, noop_pad, noop_copy,
    concatenate_trivial, noop_reverse, transpose_is_reshape, reshape_reshape, reshape_of_scalar_broadcast,
    transpose_transpose, broadcast_broadcast, slice_slice, slice_of_concatenate, reverse_reverse,
)
