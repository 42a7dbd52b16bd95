"""A dot as GEMMs: the shape both backends' dot kernels (and the CPU's BLAS calls) work with.

:func:`gemm_shape` says whether a ``dot`` is ``batch`` row-major matrix products
``C[m, n] = op(A)[m, k] @ op(B)[k, n]`` -- batch dimensions first, one contracting dimension, at
most one free dimension on each side, default layouts -- and with which transposes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xla_teach.backends.llvm.elemental_windows import dot_index_maps
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.hlo.ir import HloInstruction


@dataclass(frozen=True)
class GemmShape:
    """A dot as ``batch`` row-major GEMMs C[m,n] = op(A)[m,k] @ op(B)[k,n]."""

    batch: int
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool

    @property
    def lda(self) -> int:
        return self.m if self.trans_a else self.k

    @property
    def ldb(self) -> int:
        return self.k if self.trans_b else self.n


def gemm_shape(dot: HloInstruction) -> GemmShape | None:
    """The GEMM view of ``dot``, or None if its dimension numbers/layouts don't fit one."""
    lhs, rhs = dot.operand(0).shape, dot.operand(1).shape
    if not all(s.has_default_layout() for s in (lhs, rhs, dot.shape)):
        return None
    lb, lc, lf, rb, rc, rf = dot_index_maps(dot)
    nb = len(lb)
    if lb != list(range(nb)) or rb != list(range(nb)) or len(lc) != 1 or len(rc) != 1:
        return None
    if len(lf) > 1 or len(rf) > 1:
        return None
    m = lhs.dimensions[lf[0]] if lf else 1
    n = rhs.dimensions[rf[0]] if rf else 1
    k = lhs.dimensions[lc[0]]
    batch = 1
    for d in lb:
        batch *= lhs.dimensions[d]
    trans_a = bool(lf) and lc[0] < lf[0]
    trans_b = bool(rf) and rf[0] < rc[0]
    return GemmShape(batch, m, n, k, trans_a, trans_b)


def find_dot(ctx: KernelContext) -> HloInstruction | None:
    hero = ctx.hero()
    if hero.opcode == "dot":
        return hero
    if ctx.instr.opcode == "fusion":
        for instr in ctx.instr.fused_computation.instructions:
            if instr.opcode == "dot":
                return instr
    return None
