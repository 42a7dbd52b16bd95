"""A dot as GEMMs: the shape both backends' dot kernels (and the CPU's BLAS calls) work with.

:func:`gemm_shape` says whether a ``dot`` is ``batch`` row-major matrix products
``C[m, n] = op(A)[m, k] @ op(B)[k, n]`` -- batch dimensions first, one contracting dimension, at
most one free dimension on each side, default layouts -- and with which transposes. The GPU's
tiled kernels and the CPU's emitted loops index the operands through that view.

:func:`strided_gemm` is the wider view a BLAS call can take: each operand is a matrix *in memory*
with a row and a column stride, several free or contracting dimensions fold into one when memory
holds them one after the other, and batch dimensions may sit anywhere. That is how XLA's CPU runs
``x @ W`` on ``f32[8,128,256]`` activations as one ``1024x256 @ 256x1024`` product, with no copy.
Dimensions that memory does not hold together become loops of gemms over the operands as they
lie: an outer free dimension a loop of products (``[16, k, 256]`` contracting ``k``: 16 products of
256 rows), an outer contracted one a loop that sums its products into the same result (a weight
gradient contracting ``{0, 2}`` of ``[16, 64, 256]``: 16 products added up) -- never a copy.
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
    sum_strides: tuple[int, ...] = ()  # along the loops whose products are added up (A and B only)

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
    are matrices with a row stride of ``h * d``).

    ``batch_sizes`` are the loops of separate products: the batch dimensions, then free
    dimensions that do not fold into the rows or columns (an operand that lacks one has stride 0
    along it); ``sum_sizes`` the contracted dimensions that do not fold into ``k``, whose products
    are added into the same result."""

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
    sum_sizes: tuple[int, ...] = ()
    looped: tuple[str, ...] = ()  # dimensions that became loops, for the note

    @property
    def batch(self) -> int:
        return math.prod(self.batch_sizes)

    @property
    def summed(self) -> int:
        return math.prod(self.sum_sizes)


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


def _fold_inner(pairs: list[tuple[Shape, list[int], list[int]]]) -> int:
    """How many outer dimensions must become loops so that the rest of each ``(shape, strides,
    dims)`` folds into one stride: the first ``k`` for which every ``dims[k:]`` does."""
    count = len(pairs[0][2])
    return next(k for k in range(count + 1) if all(_collapse(s, st, d[k:]) is not None for s, st, d in pairs))


def strided_gemm(dot: HloInstruction) -> StridedGemm | None:
    """The dot as strided GEMMs (see :class:`StridedGemm`), or None when no matrix view of some
    operand has a contiguous row or column."""
    lhs, rhs, out = dot.operand(0).shape, dot.operand(1).shape, dot.shape
    lb, lc, lf, rb, rc, rf = dot_index_maps(dot)
    ls, rs, os = element_strides(lhs), element_strides(rhs), element_strides(out)
    nb = len(lb)
    out_m = list(range(nb, nb + len(lf)))
    out_n = list(range(nb + len(lf), out.rank))
    # The outer dimensions of each group that memory does not hold with the rest become loops.
    km = _fold_inner([(lhs, ls, lf), (out, os, out_m)])
    kn = _fold_inner([(rhs, rs, rf), (out, os, out_n)])
    kk = _fold_inner([(lhs, ls, lc), (rhs, rs, rc)])
    m, a_rs = _collapse(lhs, ls, lf[km:])  # type: ignore[misc]
    k, a_cs = _collapse(lhs, ls, lc[kk:])  # type: ignore[misc]
    _, b_rs = _collapse(rhs, rs, rc[kk:])  # type: ignore[misc]
    n, b_cs = _collapse(rhs, rs, rf[kn:])  # type: ignore[misc]
    _, c_rs = _collapse(out, os, out_m[km:])  # type: ignore[misc]
    _, c_cs = _collapse(out, os, out_n[kn:])  # type: ignore[misc]
    # Loops of separate products: batch dimensions, then outer free dimensions of each side.
    batch_sizes = [lhs.dimensions[d] for d in lb] + [lhs.dimensions[d] for d in lf[:km]] + \
        [rhs.dimensions[d] for d in rf[:kn]]
    a_batch = [ls[d] for d in lb] + [ls[d] for d in lf[:km]] + [0] * kn
    b_batch = [rs[d] for d in rb] + [0] * km + [rs[d] for d in rf[:kn]]
    c_batch = [os[d] for d in range(nb)] + [os[d] for d in out_m[:km]] + [os[d] for d in out_n[:kn]]
    a = MatrixView(m, k, a_rs, a_cs, tuple(a_batch), tuple(ls[d] for d in lc[:kk]))
    b = MatrixView(k, n, b_rs, b_cs, tuple(b_batch), tuple(rs[d] for d in rc[:kk]))
    c = MatrixView(m, n, c_rs, c_cs, tuple(c_batch))
    a_op, b_op, c_op = a.blas_operand(), b.blas_operand(), c.blas_operand()
    if a_op is None or b_op is None or c_op is None or c_op[0]:
        return None
    collapsed = []
    for what, shape, dims in (("rows of lhs", lhs, lf[km:]), ("contracted dims of lhs", lhs, lc[kk:]),
                              ("columns of rhs", rhs, rf[kn:])):
        if len([d for d in dims if shape.dimensions[d] != 1]) > 1:
            collapsed.append(f"{what} {list(shape.dimensions[d] for d in dims)}")
    looped = [f"{what} {list(shape.dimensions[d] for d in dims)}" for what, shape, dims in (
        ("free dims of lhs", lhs, lf[:km]), ("free dims of rhs", rhs, rf[:kn]),
        ("contracted dims", lhs, lc[:kk])) if dims]
    return StridedGemm(tuple(batch_sizes), m, n, k, a, b, c, a_op[0], b_op[0], a_op[1], b_op[1], c_op[1],
                       tuple(collapsed), tuple(lhs.dimensions[d] for d in lc[:kk]), tuple(looped))
