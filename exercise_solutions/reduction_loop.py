"""Exercise `reduction_loop`: the loops of a reduction kernel, in LLVM IR.

A ``reduce`` over the last dimension of a row-major ``f32[rows, cols]`` array becomes, in the
CPU backend (``xla_teach/backends/cpu/kernels/reduction.py``), a kernel with two nested loops:
for each row, an accumulator starts at the initial value, every element of the row is added to
it in order, and the total is stored::

    for (r = 0; r < rows; r++) {
      acc = 0.0f;
      for (c = 0; c < cols; c++)
        acc = acc + src[r * cols + c];
      dst[r] = acc;
    }

Write ``emit_row_sum(b, dst, src, rows, cols)``: it receives an ``llvmlite.ir.IRBuilder``
positioned in the entry block of ``void kernel(ptr dst, ptr src, i64 rows, i64 cols)``, and the
four arguments, and must emit that loop nest with the builder -- basic blocks for each loop's
header, body and exit, ``phi`` nodes (or ``alloca`` stack slots) for the counters and the
accumulator, ``fadd`` on ``float``. When it returns, the builder must be positioned where the
kernel continues (after both loops): the grader adds the ``ret void`` there. ``rows`` and
``cols`` are only known when the kernel runs (they may be 0), so the loops must test them.

Add the elements in index order, as above: the grader compares your sums with a sequential
float32 sum, bit for bit (floating-point addition is not associative, so another order gives
other last bits). Chapter 05 of the notebooks reads the IR the CPU backend emits for a reduce.

Useful llvmlite calls: ``b.function.append_basic_block(name)``, ``b.branch``, ``b.cbranch``,
``b.position_at_end(block)``, ``b.phi(type)`` + ``phi.add_incoming(value, block)``,
``b.icmp_signed("<", a, c)``, ``b.gep(ptr, [index], source_etype=ir.FloatType())``,
``b.load(ptr, typ=ir.FloatType())``, ``b.store(value, ptr)``, ``b.fadd``, ``b.add``, ``b.mul``.

Grade it:  xla-teach grade reduction_loop path/to/reduction_loop.py
"""

from __future__ import annotations

from llvmlite import ir

F32 = ir.FloatType()
I64 = ir.IntType(64)


def emit_row_sum(b: ir.IRBuilder, dst: ir.Value, src: ir.Value, rows: ir.Value, cols: ir.Value) -> None:
    # BEGIN SOLUTION: two loops (header, body, exit blocks); phis for r, c and the accumulator
    fn = b.function
    entry = b.block
    row_header, row_body, col_header, col_body, col_exit, done = (
        fn.append_basic_block(name) for name in ("row.header", "row.body", "col.header", "col.body", "col.exit",
                                                  "done"))
    b.branch(row_header)
    b.position_at_end(row_header)
    r = b.phi(I64, name="r")
    r.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", r, rows), row_body, done)

    b.position_at_end(row_body)
    base = b.mul(r, cols, name="base")
    b.branch(col_header)

    b.position_at_end(col_header)
    c = b.phi(I64, name="c")
    acc = b.phi(F32, name="acc")
    c.add_incoming(ir.Constant(I64, 0), row_body)
    acc.add_incoming(ir.Constant(F32, 0.0), row_body)
    b.cbranch(b.icmp_signed("<", c, cols), col_body, col_exit)

    b.position_at_end(col_body)
    x = b.load(b.gep(src, [b.add(base, c)], inbounds=True, source_etype=F32), typ=F32, name="x")
    c.add_incoming(b.add(c, ir.Constant(I64, 1)), col_body)
    acc.add_incoming(b.fadd(acc, x), col_body)
    b.branch(col_header)

    b.position_at_end(col_exit)
    b.store(acc, b.gep(dst, [r], inbounds=True, source_etype=F32))
    r.add_incoming(b.add(r, ir.Constant(I64, 1)), col_exit)
    b.branch(row_header)

    b.position_at_end(done)
    # END SOLUTION
