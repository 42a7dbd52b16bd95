"""GPU scatter and dynamic-update-slice: one thread per update element, atomics where they collide.

**scatter** runs in two parts, as on XLA:GPU: the operand is first copied into the output
buffer (a device-to-device memcpy the runtime issues before the kernel; nothing to do when
buffer assignment already put the result in the operand's buffer), then thread ``t`` applies
update element ``t``::

    (inside, target) = scatter_target(indices, t)      # backends/llvm/scatter_indexing.py
    if inside: out[target] = combine(out[target], updates[t])   -- atomically

Two updates may land on the same element, so the read-combine-write must be atomic:

* ``add`` of s32/u32/s64/u64/f32/f64, ``and``/``or``/``xor`` of 32/64-bit integers and
  ``maximum``/``minimum`` of 32/64-bit integers are single ``atom.global`` instructions
  (LLVM's ``atomicrmw``);
* a combiner that returns the update (assignment) is a plain store;
* any other combiner (float ``maximum``, ``multiply``, f16/bf16, 8/16-bit integers ...) is
  a compare-and-swap loop on the aligned 32- or 64-bit word that holds the element: read the
  word, combine, ``cmpxchg``; if another thread changed the word meanwhile, combine again
  with what it wrote.

Integer results are therefore deterministic whatever the order (the operations are
associative and commutative), as on XLA. Float ``add`` collisions are summed in whatever
order the threads arrive, and an assignment with duplicate indices keeps one of the updates
-- both nondeterministic, as XLA's GPU scatter is by default.

**dynamic-update-slice** in place (the result shares the operand's buffer) launches one
thread per update element writing at the clamped start; otherwise one thread per output
element picks the update or the operand, so no copy is needed first.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.gpu.kernel_builder import LaunchDimensions, linear_launch
from xla_teach.backends.llvm.elemental_emitter import clamp_index, clamp_range, widen_index
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, delinearize, i64
from xla_teach.backends.llvm.ir_types import I32, I64, from_storage, to_storage
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import if_then
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.backends.llvm.scatter_indexing import scatter_target
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.types import PrimitiveType

INTEGER_RMW = {"add": "add", "and": "and", "or": "or", "xor": "xor"}


def combiner_kind(comp: HloComputation) -> str:
    """``assign`` (root is the update), ``keep`` (root is the current value), the opcode of a
    binary op of the two parameters, or ``other``."""
    params = comp.parameter_instructions
    root = comp.root
    if len(params) != 2:
        return "other"
    if root is params[1]:
        return "assign"
    if root is params[0]:
        return "keep"
    if root.operand_count == 2 and set(root.operands) == set(params):
        return root.opcode
    return "other"


def _rmw_op(kind: str, etype: PrimitiveType) -> str | None:
    """The ``atomicrmw`` operation that does ``kind`` on ``etype`` in one instruction, if any."""
    if etype in (PrimitiveType.F32, PrimitiveType.F64):
        return "fadd" if kind == "add" else None
    if not etype.is_integral or etype.bit_width not in (32, 64):
        return None
    if kind in INTEGER_RMW:
        return INTEGER_RMW[kind]
    if kind in ("maximum", "minimum"):
        signed = etype.is_signed_int
        return ("max" if signed else "umax") if kind == "maximum" else ("min" if signed else "umin")
    return None


def emit_atomic_combine(ctx: KernelContext, comp: HloComputation, out: IrArray, index: IrIndex,
                        update: ir.Value) -> None:
    """``out[index] = comp(out[index], update)``, atomic against other threads doing the same."""
    b = ctx.b
    etype = out.element_type
    address = out.address(b, index)
    kind = combiner_kind(comp)
    if kind == "keep":
        return
    if kind == "assign":
        b.store(to_storage(b, update, etype), address)
        return
    op = _rmw_op(kind, etype)
    if op is not None:
        b.atomic_rmw(op, address, to_storage(b, update, etype), "monotonic")
        return
    _cas_loop(ctx, comp, out, address, update)


def _cas_loop(ctx: KernelContext, comp: HloComputation, out: IrArray, address: ir.Value, update: ir.Value) -> None:
    """Compare-and-swap on the aligned word holding the element (32 bits, or 64 for 8-byte types)."""
    b = ctx.b
    etype = out.element_type
    bits = etype.bit_width if etype is not PrimitiveType.PRED else 8
    word_type = I64 if bits == 64 else I32
    element_int = ir.IntType(bits)
    as_int = b.ptrtoint(address, I64)
    word_address = b.inttoptr(b.and_(as_int, i64(~(word_type.width // 8 - 1))), address.type)
    shift = b.trunc(b.mul(b.and_(as_int, i64(word_type.width // 8 - 1)), i64(8)), word_type) \
        if bits < word_type.width else None
    mask = ((1 << bits) - 1)

    def element_of(word: ir.Value) -> ir.Value:
        raw = word if shift is None else b.trunc(b.lshr(word, shift), element_int)
        storage = out.storage
        if raw.type != storage:
            raw = b.bitcast(raw, storage)
        return from_storage(b, raw, etype)

    def with_element(word: ir.Value, value: ir.Value) -> ir.Value:
        raw = to_storage(b, value, etype)
        if raw.type != element_int:
            raw = b.bitcast(raw, element_int)
        if shift is None:
            return raw
        cleared = b.and_(word, b.not_(b.shl(ir.Constant(word_type, mask), shift)))
        return b.or_(cleared, b.shl(b.zext(raw, word_type), shift))

    entry = b.block
    first = b.load(word_address, typ=word_type)
    loop = b.append_basic_block("cas.loop")
    done = b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(word_type, "cas.old")
    old.add_incoming(first, entry)
    combined = emit_scalar_computation(b, comp, [element_of(old), update])[0]
    pair = b.cmpxchg(word_address, old, with_element(old, combined), "monotonic", "monotonic")
    seen, ok = b.extract_value(pair, 0), b.extract_value(pair, 1)
    old.add_incoming(seen, b.block)
    b.cbranch(ok, done, loop)
    b.position_at_end(done)


def emit_gpu_scatter_kernel(ctx: KernelContext) -> LaunchDimensions:
    """The update part of a single-operand scatter (the runtime has copied the operand over)."""
    instr, b = ctx.instr, ctx.b
    operand, indices, updates = ctx.operand_arrays
    (out,) = ctx.output_arrays
    count = updates.shape.element_count()
    launch = linear_launch(max(count, 1))
    if count == 0 or out.shape.element_count() == 0:
        return launch
    tid = ctx.kb.global_thread_id()  # type: ignore[attr-defined]
    with if_then(b, b.icmp_unsigned("<", tid, i64(count)), "scatter.thread"):
        u = delinearize(b, tid, updates.shape)
        inside, target = scatter_target(b, instr, indices, updates.shape, operand.shape, u)
        with if_then(b, inside, "scatter.inbounds"):
            emit_atomic_combine(ctx, instr.to_apply, out, IrIndex(target, out.shape), updates.load(b, u))
    return launch


def emit_gpu_dynamic_update_slice_kernel(ctx: KernelContext, in_place: bool) -> LaunchDimensions:
    b = ctx.b
    operand, update = ctx.operand_arrays[0], ctx.operand_arrays[1]
    out = ctx.output_arrays[0]
    starts = []
    for d in range(operand.shape.rank):
        array = ctx.operand_arrays[2 + d]
        raw = array.load(b, IrIndex.scalar(array.shape))
        wide = widen_index(b, raw, array.shape.element_type.is_signed_int)
        starts.append(clamp_range(b, wide, 0, operand.shape.dimensions[d] - update.shape.dimensions[d]))
    walked = update if in_place else out  # one thread per element of this array
    count = walked.shape.element_count()
    launch = linear_launch(max(count, 1))
    if count == 0:
        return launch
    tid = ctx.kb.global_thread_id()  # type: ignore[attr-defined]
    with if_then(b, b.icmp_unsigned("<", tid, i64(count)), "dus.thread"):
        index = delinearize(b, tid, walked.shape)
        if in_place:
            target = tuple(clamp_index(b, b.add(v, s), size) for v, s, size in
                           zip(index.dims, starts, operand.shape.dimensions, strict=True))
            out.store(b, update.load(b, index), IrIndex(target, out.shape))
        else:
            inside = ir.Constant(ir.IntType(1), 1)
            offsets = []
            for v, s, size in zip(index.dims, starts, update.shape.dimensions, strict=True):
                offset = b.sub(v, s)
                inside = b.and_(inside, b.and_(b.icmp_signed(">=", offset, i64(0)),
                                               b.icmp_signed("<", offset, i64(size))))
                offsets.append(b.select(b.icmp_signed(">=", offset, i64(0)), offset, i64(0)))
            safe = tuple(b.select(inside, o, i64(0)) for o in offsets)
            from_update = update.load(b, IrIndex(safe, update.shape)) if update.shape.element_count() else None
            from_operand = operand.load(b, IrIndex(index.dims, operand.shape))
            value = from_operand if from_update is None else b.select(inside, from_update, from_operand)
            out.store(b, value, index)
    return launch
