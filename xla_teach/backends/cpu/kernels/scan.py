"""Prefix scans: ``cumsum``, ``cumprod``, ``cummax`` as one pass per row instead of one window per element.

JAX writes ``jnp.cumsum(x, axis=1)`` as a ``reduce-window`` whose window covers the whole axis,
padded on the low side with n - 1 initial values::

    cs = f32[8,4096] reduce-window(x, zero), window={size=1x4096 pad=0_0x4095_0}, to_apply=add

Element k of the result is the reduction of window k: x[0] ... x[k] (the padding cells add
nothing). The general reduce-window kernel computes each window from scratch -- n(n+1)/2 steps
per row, 8 million for one row of 4096. But window k + 1 is window k plus one element, so a
single running value gives every result in one pass::

    for each row:                       # every index but the scan dimension
      acc = init
      for k in 0 .. n-1:                # (n-1 .. 0 for a suffix scan, padding on the high side)
        acc = reducer(acc, x[row, k])
        out[row, k] = acc

The reductions happen in the same order as the general kernel's (init, then x[0], x[1], ...),
so the results are bit for bit the same, in O(n) per row. A suffix scan (padding on the high
side, ``cumsum(reverse=True)``) runs from the end, which changes the order of a float sum or
product: those stay on the general kernel; max, min and integer suffix scans use this one.
"""

from __future__ import annotations

from llvmlite import ir

from xla_teach.backends.cpu.kernels.partitions import choose_partitions
from xla_teach.backends.llvm.ir_array import IrIndex, i64
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.loops import for_range, stack_slot
from xla_teach.backends.llvm.scalar_computation import emit_scalar_computation
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import ASSOCIATIVE_OPCODES, COMMUTATIVE_OPCODES

# A scan walks its dimension in order, so any associative reducer will do; the reducer's two
# parameters may come in either order, so it must be commutative too.
SCAN_REDUCERS = ASSOCIATIVE_OPCODES & COMMUTATIVE_OPCODES


def scan_dimension(instr: HloInstruction) -> tuple[int, bool] | None:
    """``(dimension, reverse)`` when ``instr`` is a prefix (or, reversed, suffix) scan: a
    single-operand reduce-window with a binary reducer whose window spans one whole dimension,
    padded by n - 1 on one side, and is 1 wide everywhere else."""
    if instr.opcode != "reduce-window" or instr.operand_count != 2 or instr.shape.is_tuple:
        return None
    root = instr.to_apply.root
    params = instr.to_apply.parameter_instructions
    if root.opcode not in SCAN_REDUCERS or len(params) != 2 or set(root.operands) != set(params):
        return None
    window = instr.attr("window")
    dims = instr.operand(0).shape.dimensions
    found = None
    for d, w in enumerate(window.dimensions):
        if w.stride != 1 or w.window_dilation != 1 or w.base_dilation != 1 or w.window_reversal:
            return None
        if w.size == 1 and w.padding_low == 0 and w.padding_high == 0:
            continue
        n = dims[d]
        if found is not None or n < 2 or w.size != n or {w.padding_low, w.padding_high} != {0, n - 1}:
            return None
        found = (d, w.padding_high == n - 1)
    if found is not None and found[1] and root.opcode in ("add", "multiply") and instr.shape.element_type.is_float:
        # A suffix window reduces x[k], x[k+1], ... in that order; a running value from the end
        # would round float sums differently. (Exact reducers -- max, min, integers -- may.)
        return None
    return found


def emit_scan_kernel(ctx: KernelContext) -> tuple[int, int]:
    instr = ctx.instr
    found = scan_dimension(instr)
    assert found is not None
    scan, reverse = found
    b = ctx.b
    source, init = ctx.operand_arrays
    out = ctx.output_arrays[0]
    shape = instr.shape
    n = shape.dimensions[scan]
    # The other dimensions, major to minor in the output's layout; the outermost honours [begin, end).
    others = [d for d in reversed(shape.minor_to_major()) if d != scan]
    initial = init.load(b, IrIndex.scalar(init.shape))
    acc = stack_slot(b, initial.type, f"{instr.name}.acc")

    def row(index: list[ir.Value]) -> None:
        b.store(initial, acc)
        with for_range(b, i64(n), f"{instr.name}.k") as k:
            position = b.sub(i64(n - 1), k) if reverse else k
            full = list(index)
            full[scan] = position
            value = source.load(b, IrIndex(tuple(full), source.shape))
            (total,) = emit_scalar_computation(b, instr.to_apply, [b.load(acc), value])
            b.store(total, acc)
            out.store(b, total, IrIndex(tuple(full), shape))

    def nest(level: int, index: list[ir.Value]) -> None:
        if level == len(others):
            row(index)
            return
        d = others[level]
        start, stop = (ctx.kb.begin, ctx.kb.end) if level == 0 else (i64(0), i64(shape.dimensions[d]))
        with for_range(b, stop, f"{instr.name}.d{d}", start) as i:
            index[d] = i
            nest(level + 1, index)

    if not others:  # one dimension: a single row, not split
        row([i64(0)])
        return 1, 1
    nest(0, [i64(0)] * shape.rank)
    outer = shape.dimensions[others[0]]
    return outer, choose_partitions(outer, shape.element_count() * 4)
