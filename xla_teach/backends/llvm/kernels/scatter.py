"""Scatter-like kernels: ``scatter``, ``select-and-scatter`` and ``dynamic-update-slice``.

These write to positions computed at run time, so they are emitted as plain
sequential loops (duplicate targets apply one after another, as on XLA:CPU):

* **scatter** -- copy the operands to the outputs, then for every update element
  find its target (index vector from ``indices`` + window offset) and combine
  ``out = f(out, update)``; a window whose start is out of bounds is skipped;
* **select-and-scatter** -- fill the output with ``init``; for every source
  element fold the ``select`` computation over its window to pick one operand
  position, then ``out[picked] = scatter(out[picked], source)``;
* **dynamic-update-slice** -- if buffer assignment put the result in the
  operand's own buffer, only the update region is written (in place);
  otherwise the operand is copied first.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.llvm.elemental_emitter import clamp_index, clamp_range, widen_index
from xla_teach.backends.llvm.elemental_windows import loop_nest, window_position
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, i64
from xla_teach.backends.llvm.ir_types import I1, I64
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_each_index, if_then, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.backends.llvm.scatter_indexing import scatter_target


def _copy(ctx: KernelContext, source: IrArray, dest: IrArray) -> None:
    for_each_index(ctx.b, dest.shape, lambda index: dest.store(ctx.b, source.load(ctx.b, IrIndex(
        index.dims, source.shape)), index), "copy")


def emit_scatter_kernel(ctx: KernelContext, in_place: bool = False) -> tuple[int, int]:
    """The operand copied into the output (unless buffer assignment put the output in the
    operand's buffer: ``in_place``), then each update combined into its target element."""
    instr, b = ctx.instr, ctx.b
    n = (instr.operand_count - 1) // 2
    operands, indices, updates = ctx.operand_arrays[:n], ctx.operand_arrays[n], ctx.operand_arrays[n + 1:]
    outputs = ctx.output_arrays
    if not in_place:
        for source, dest in zip(operands, outputs, strict=True):
            _copy(ctx, source, dest)
    upd_shape = updates[0].shape

    def body(u: IrIndex) -> None:
        inside, target = scatter_target(b, instr, indices, upd_shape, operands[0].shape, u)
        with if_then(b, inside, "scatter.inbounds"):
            index = IrIndex(target, operands[0].shape)
            current = [out.load(b, IrIndex(index.dims, out.shape)) for out in outputs]
            new_values = [upd.load(b, IrIndex(u.dims, upd.shape)) for upd in updates]
            combined = emit_scalar_computation(b, instr.to_apply, current + new_values)
            for out, value in zip(outputs, combined, strict=True):
                out.store(b, value, IrIndex(index.dims, out.shape))

    for_each_index(b, upd_shape, body, "update")
    return 1, 1


def emit_select_and_scatter_kernel(ctx: KernelContext) -> tuple[int, int]:
    instr, b = ctx.instr, ctx.b
    operand, source, init = ctx.operand_arrays
    out = ctx.output_arrays[0]
    window = instr.attr("window").dimensions
    init_value = init.load(b, IrIndex.scalar(init.shape))
    for_each_index(b, out.shape, lambda index: out.store(b, init_value, index), "fill")
    shape = operand.shape
    chosen = [stack_slot(b, I64, f"sel.d{d}") for d in range(shape.rank)]
    has = stack_slot(b, I1, "sel.has")

    def per_source(s: IrIndex) -> None:
        b.store(ir.Constant(I1, 0), has)

        def per_window(ks: list[ir.Value]) -> None:
            inside = ir.Constant(I1, 1)
            pos = []
            for d, (k, wd) in enumerate(zip(ks, window, strict=True)):
                p, ok = window_position(b, s.dims[d], k, wd, shape.dimensions[d])
                pos.append(p)
                inside = b.and_(inside, ok)
            with if_then(b, inside, "sel.valid"):
                candidate = operand.load(b, IrIndex(tuple(pos), shape))
                current = operand.load(b, IrIndex(tuple(b.load(c) for c in chosen), shape))
                keep = emit_scalar_computation(b, instr.attrs["select"], [current, candidate])[0]
                take = b.or_(b.not_(b.load(has)), b.not_(keep))
                for slot, p in zip(chosen, pos, strict=True):
                    b.store(b.select(take, p, b.load(slot)), slot)
                b.store(ir.Constant(I1, 1), has)

        for slot in chosen:
            b.store(i64(0), slot)
        loop_nest(b, [wd.size for wd in window], "sel.w", per_window)
        with if_then(b, b.load(has), "sel.scatter"):
            index = IrIndex(tuple(b.load(c) for c in chosen), out.shape)
            value = source.load(b, IrIndex(s.dims, source.shape))
            combined = emit_scalar_computation(b, instr.attrs["scatter"], [out.load(b, index), value])[0]
            out.store(b, combined, index)

    for_each_index(b, source.shape, per_source, "source")
    return 1, 1


def emit_dynamic_update_slice_kernel(ctx: KernelContext, in_place: bool) -> tuple[int, int]:
    instr, b = ctx.instr, ctx.b
    operand, update = ctx.operand_arrays[0], ctx.operand_arrays[1]
    out = ctx.output_arrays[0]
    if not in_place:
        _copy(ctx, operand, out)
    starts = []
    for d in range(operand.shape.rank):
        array = ctx.operand_arrays[2 + d]
        raw = array.load(b, IrIndex.scalar(array.shape))
        wide = widen_index(b, raw, array.shape.element_type.is_signed_int)
        starts.append(clamp_range(b, wide, 0, operand.shape.dimensions[d] - update.shape.dimensions[d]))

    def body(u: IrIndex) -> None:
        target = tuple(clamp_index(b, b.add(v, s), size) for v, s, size in
                       zip(u.dims, starts, operand.shape.dimensions, strict=True))
        out.store(b, update.load(b, u), IrIndex(target, out.shape))

    for_each_index(b, update.shape, body, "dus")
    del instr
    return 1, 1
