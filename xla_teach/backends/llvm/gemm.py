"""A dot as GEMMs: the shape both backends' dot kernels (and the CPU's BLAS calls) work with.

:func:`gemm_shape` says whether a ``dot`` is ``batch`` row-major matrix products
``C[m, n] = op(A)[m, k] @ op(B)[k, n]`` -- batch dimensions first, one contracting dimension, at
most one free dimension on each side, default layouts -- and with which transposes. The GPU's
tiled kernels and the CPU's emitted loops index the operands through that view.

:func:`strided_gemm` is the wider view a BLAS call can take: each operand is a matrix *in memory*
with a row and a column stride, several free or contracting dimensions fold into one when memory
holds them one after the other, and batch dimensions may sit anywhere. That is how XLA's CPU runs
``x @ W`` on ``f32[8,128,256]`` activations as one ``1024x256 @ 256x1024`` product, with no copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xla_teach.backends.llvm.elemental_windows import dot_index_maps
from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.shape import Shape


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


# ---- a dot as strided matrices in memory (the CPU's BLAS calls) --------------------------------
@dataclass(frozen=True)
class MatrixView:
    """A ``rows x cols`` matrix inside an array: element ``(i, j)`` of batch ``b`` is at
    ``sum(b_d * batch_strides[d]) + i * row_stride + j * col_stride`` elements from the base."""

    rows: int
    cols: int
    row_stride: int
    col_stride: int
    batch_strides: tuple[int, ...]

    def blas_operand(self) -> tuple[bool, int] | None:
        """``(transposed, leading dimension)`` for a row-major BLAS call, or None when neither the
        rows nor the columns are contiguous (BLAS needs one of them to be)."""
        if self.cols <= 1 or self.col_stride == 1:  # rows of contiguous elements
            return False, max(self.row_stride if self.rows > 1 else self.cols, self.cols, 1)
        if self.rows <= 1 or self.row_stride == 1:  # columns of contiguous elements: op(X) = X^T
            return True, max(self.col_stride if self.cols > 1 else self.rows, self.rows, 1)
        return None


@dataclass(frozen=True)
class StridedGemm:
    """A dot as ``C = op(A) @ op(B)`` for every index of its batch dimensions, each operand a
    :class:`MatrixView` of the array it lives in. Several free (or contracting) dimensions count as
    one when they are consecutive in memory, so ``f32[8,128,256] x f32[256,1024]`` (a dense layer on
    3-D activations) is one 1024x1024x256 product and its weight gradient, contracting ``{0,1}``, is
    one product with ``k = 1024``; batch dimensions may sit anywhere (attention's ``bqhd`` operands
    are matrices with a row stride of ``h * d``)."""

    batch_sizes: tuple[int, ...]
    m: int
    n: int
    k: int
    a: MatrixView
    b: MatrixView
    c: MatrixView
    trans_a: bool
    trans_b: bool
    lda: int
    ldb: int
    ldc: int
    collapsed: tuple[str, ...]  # what was folded, for the dot's note ("rows of lhs [8,128]", ...)

    @property
    def batch(self) -> int:
        return math.prod(self.batch_sizes)


def element_strides(shape: Shape) -> list[int]:
    """Distance in elements between neighbours along each dimension, from the shape's layout."""
    strides, step = [0] * shape.rank, 1
    for d in shape.minor_to_major():
        strides[d] = step
        step *= shape.dimensions[d]
    return strides


def _collapse(shape: Shape, strides: list[int], dims: list[int]) -> tuple[int, int] | None:
    """``(size, stride)`` of ``dims`` read as one row-major index (first dim most major), or None
    if memory does not hold them that way. Dimensions of size 1 take no room and are skipped."""
    real = [d for d in dims if shape.dimensions[d] != 1]
    size = math.prod(shape.dimensions[d] for d in dims)
    if not real:
        return size, 0
    for outer, inner in zip(real, real[1:], strict=False):
        if strides[outer] != strides[inner] * shape.dimensions[inner]:
            return None
    return size, strides[real[-1]]


def strided_gemm(dot: HloInstruction) -> StridedGemm | None:
    """The dot as strided GEMMs (see :class:`StridedGemm`), or None when some group of its
    dimensions is not one stride in memory or no matrix has a contiguous row or column."""
    lhs, rhs, out = dot.operand(0).shape, dot.operand(1).shape, dot.shape
    lb, lc, lf, rb, rc, rf = dot_index_maps(dot)
    ls, rs, os = element_strides(lhs), element_strides(rhs), element_strides(out)
    nb = len(lb)
    out_m = list(range(nb, nb + len(lf)))
    out_n = list(range(nb + len(lf), out.rank))
    groups = [_collapse(lhs, ls, lf), _collapse(lhs, ls, lc), _collapse(rhs, rs, rc), _collapse(rhs, rs, rf),
              _collapse(out, os, out_m), _collapse(out, os, out_n)]
    if any(g is None for g in groups):
        return None
    (m, a_rs), (k, a_cs), (_, b_rs), (n, b_cs), (_, c_rs), (_, c_cs) = groups  # type: ignore[misc]
    a = MatrixView(m, k, a_rs, a_cs, tuple(ls[d] for d in lb))
    b = MatrixView(k, n, b_rs, b_cs, tuple(rs[d] for d in rb))
    c = MatrixView(m, n, c_rs, c_cs, tuple(os[d] for d in range(nb)))
    a_op, b_op, c_op = a.blas_operand(), b.blas_operand(), c.blas_operand()
    if a_op is None or b_op is None or c_op is None or c_op[0]:
        return None
    collapsed = []
    for what, shape, dims in (("rows of lhs", lhs, lf), ("contracted dims of lhs", lhs, lc),
                              ("columns of rhs", rhs, rf)):
        if len([d for d in dims if shape.dimensions[d] != 1]) > 1:
            collapsed.append(f"{what} {list(shape.dimensions[d] for d in dims)}")
    return StridedGemm(tuple(lhs.dimensions[d] for d in lb), m, n, k, a, b, c, a_op[0], b_op[0], a_op[1], b_op[1],
                       c_op[1], tuple(collapsed))
