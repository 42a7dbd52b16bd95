"""Convolutions as one matrix product (``convolution-to-dot``): im2col, then the BLAS dot.

A convolution computed element by element loops over the kernel window for every output
element: for a 3x3 convolution of 64 to 64 channels over 8x56x56 images that is 231 million
multiply-adds issued one at a time, 30x slower than XLA (which calls a tuned library). The
same sum is a matrix product: gather, for every output position, the window of input values
it reads (all kernel offsets x input features: the *im2col* patch matrix) and multiply it by
the kernel flattened to (offsets x input features) x output features. The product then runs
in the BLAS ``sgemm`` the dot kernels already use.

With the input in the order [batch, spatial..., features] and padded, the patch for kernel
offset k is a strided slice of it; the slices for every offset, stacked along a new offset
dimension just before the features, make the patch matrix (its reshape to rows x (k, c) keeps
the bytes where they are):

    patches[n, o..., (k, c)] = padded[n, o * stride + k, c]
    out[n, o..., f] = sum over (k, c) of patches[n, o..., (k, c)] * kernel[k, c, f]

The same matrix can be cut the other way: one slice per *output position*, holding the whole
window it reads. That takes fewer slices when the output is smaller than the kernel -- JAX's
weight gradient of a 3x3 convolution is a convolution whose window is the image (28x28 taps)
and whose output is the 3x3 kernel: 9 slices instead of 784 (and a compile of 0.5 s, not 26 s).
Laid out as JAX writes it (input ``[C, S..., N]``), each output position's window is then a
slice of the input as it lies in memory, multiplied by the kernel with one transposed dot and
no transpose of the input at all (a 3x3 weight gradient over 8x28x28x32: 315 ms -> 4 ms).

Padding cells take no part in a convolution's products (a NaN or inf weight over one adds
nothing, as XLA computes it), but in the patch matrix they are zeros the dot multiplies. So a
padded convolution becomes ``conditional(every weight finite, im2col + dot, the convolution as
written)``: with finite weights the extra products are exact zeros.

This pass rewrites convolutions without grouping, dilation or window reversal whose patch
matrix stays under 256 MiB; transposes put the dimensions
where the rest expects them when they are not there already. The sums are the same terms in another
order, so results agree with the interpreter to rounding.

Before::

    ENTRY main {
      x = f32[1,4,2] parameter(0)
      w = f32[2,2,3] parameter(1)
      ROOT c = f32[1,3,3] convolution(x, w), window={size=2}, dim_labels=b0f_0io->b0f
    }

After::

    ENTRY main {
      x = f32[1,4,2] parameter(0)
      slice = f32[1,3,2] slice(x), slice={[0:1], [0:3], [0:2]}
      reshape = f32[1,3,1,2] reshape(slice)
      slice.1 = f32[1,3,2] slice(x), slice={[0:1], [1:4], [0:2]}
      reshape.1 = f32[1,3,1,2] reshape(slice.1)
      concatenate = f32[1,3,2,2] concatenate(reshape, reshape.1), dimensions={2}
      reshape.2 = f32[3,4] reshape(concatenate)
      w = f32[2,2,3] parameter(1)
      reshape.3 = f32[4,3] reshape(w)
      dot = f32[3,3] dot(reshape.2, reshape.3), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      ROOT c = f32[1,3,3] reshape(dot)
    }
"""

from __future__ import annotations

import math

from xla_teach.hlo.attributes import PaddingDim, SliceDim
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_callee, add_constant, add_instruction

MAX_PATCH_BYTES = 256 << 20


def _why_not(conv: HloInstruction) -> str | None:
    window = conv.attr("window")
    if int(conv.attr("feature_group_count")) != 1 or int(conv.attr("batch_group_count")) != 1:
        return "grouped"
    if any(d.window_dilation != 1 or d.base_dilation != 1 or d.window_reversal for d in window.dimensions):
        return "dilated or reversed window"
    if any(d.padding_low < 0 or d.padding_high < 0 for d in window.dimensions):
        return "negative padding"
    if conv.shape.element_type not in (PrimitiveType.F32, PrimitiveType.F64) or any(
            o.shape.element_type is not conv.shape.element_type for o in conv.operands):
        return "not an f32/f64 product"
    dnums = conv.attr("dim_labels")
    lhs, rhs = conv.operand(0).shape, conv.operand(1).shape
    taps = math.prod(rhs.dimensions[d] for d in dnums.kernel_spatial_dimensions)
    features = lhs.dimensions[dnums.input_feature_dimension]
    rows = conv.shape.element_count() // max(conv.shape.dimensions[dnums.output_feature_dimension], 1)
    if rows * taps * features * lhs.element_type.byte_size > MAX_PATCH_BYTES:
        return "patch matrix too large"
    return None


def _is_weight_gradient(conv: HloInstruction) -> bool:
    """A convolution laid out as JAX writes a weight gradient: input ``[C, S..., N]`` (features
    first, batch last, ``f01b``), kernel ``[I, K..., O]`` (``i01o``), and fewer output positions
    than kernel taps -- the output is the small kernel, the "kernel" the big output gradient."""
    dnums = conv.attr("dim_labels")
    rank = conv.operand(0).shape.rank
    spatial = list(range(1, rank - 1))
    out_sizes = [conv.shape.dimensions[d] for d in dnums.output_spatial_dimensions]
    taps = [conv.operand(1).shape.dimensions[d] for d in dnums.kernel_spatial_dimensions]
    return (dnums.input_feature_dimension == 0 and dnums.input_batch_dimension == rank - 1
            and list(dnums.input_spatial_dimensions) == spatial and dnums.kernel_input_feature_dimension == 0
            and dnums.kernel_output_feature_dimension == rank - 1 and list(dnums.kernel_spatial_dimensions) == spatial
            and conv.operand(0).shape.has_default_layout() and conv.operand(1).shape.has_default_layout()
            and math.prod(out_sizes) < math.prod(taps))


def _rewrite_weight_gradient(comp: HloComputation, conv: HloInstruction, x: HloInstruction,
                             w: HloInstruction) -> HloInstruction:
    """A weight gradient (see :func:`_is_weight_gradient`) as one dot per output position, with no
    transpose: the window an output position reads is a slice ``[C, K..., N]`` of the input as it
    lies in memory, and contracting its rows ``(C, K...)`` with the kernel's rows ``(I, K...)``
    gives that position's ``[N, O]`` -- the transposed product BLAS computes from the same bytes::

        out[o, n, f] = sum over (c, k) of x[c, o + k, n] * w[c, k, f]
    """
    dnums = conv.attr("dim_labels")
    window = conv.attr("window").dimensions
    inp = _pad_spatial(comp, x, window)
    c, n = inp.shape.dimensions[0], inp.shape.dimensions[-1]
    out_sizes = [conv.shape.dimensions[d] for d in dnums.output_spatial_dimensions]
    kernel_sizes = list(w.shape.dimensions[1:-1])
    features = w.shape.dimensions[-1]
    depth = c * math.prod(kernel_sizes)
    kernel = add_instruction(comp, "reshape", [w], result_dims=(depth, features))
    products = []
    for position in _offsets(out_sizes):
        spec = [SliceDim(0, c)]
        spec += [SliceDim(o * d.stride, o * d.stride + k)
                 for o, k, d in zip(position, kernel_sizes, window, strict=True)]
        spec.append(SliceDim(0, n))
        window_slice = add_instruction(comp, "slice", [inp], {"slice": tuple(spec)})
        rows = add_instruction(comp, "reshape", [window_slice], result_dims=(depth, n))
        product = add_instruction(comp, "dot", [rows, kernel], {
            "lhs_batch_dims": (), "lhs_contracting_dims": (0,), "rhs_batch_dims": (), "rhs_contracting_dims": (0,),
            "operand_precision": ()})
        products.append(add_instruction(comp, "reshape", [product], result_dims=(1, n, features)))
    stacked = products[0] if len(products) == 1 else add_instruction(comp, "concatenate", products,
                                                                     {"dimensions": (0,)})
    onf = add_instruction(comp, "reshape", [stacked], result_dims=(*out_sizes, n, features))
    canonical = [*dnums.output_spatial_dimensions, dnums.output_batch_dimension, dnums.output_feature_dimension]
    return _transpose(comp, onf, [canonical.index(d) for d in range(len(canonical))])


def _rewrite(comp: HloComputation, conv: HloInstruction, x: HloInstruction, w: HloInstruction) -> HloInstruction:
    """``conv`` of ``x`` and ``w`` (instructions of ``comp``) as im2col slices and one dot."""
    if _is_weight_gradient(conv):
        return _rewrite_weight_gradient(comp, conv, x, w)
    dnums = conv.attr("dim_labels")
    window = conv.attr("window").dimensions
    # Input as [N, S..., C], padded.
    order = [dnums.input_batch_dimension, *dnums.input_spatial_dimensions, dnums.input_feature_dimension]
    inp = _pad_spatial(comp, _transpose(comp, x, order), window)
    n, c = inp.shape.dimensions[0], inp.shape.dimensions[-1]
    out_sizes = [conv.shape.dimensions[d] for d in dnums.output_spatial_dimensions]
    kernel_sizes = [w.shape.dimensions[d] for d in dnums.kernel_spatial_dimensions]
    rows = n * math.prod(out_sizes)
    depth = math.prod(kernel_sizes) * c
    if math.prod(out_sizes) < math.prod(kernel_sizes):
        patches = _patches_by_output_position(comp, inp, out_sizes, kernel_sizes, window)
    else:
        patches = _patches_by_kernel_offset(comp, inp, out_sizes, kernel_sizes, window)
    lhs = add_instruction(comp, "reshape", [patches], result_dims=(rows, depth))
    # Kernel as [K..., I, O] -> [(K, I), O].
    korder = [*dnums.kernel_spatial_dimensions, dnums.kernel_input_feature_dimension,
              dnums.kernel_output_feature_dimension]
    kernel = _transpose(comp, w, korder)
    features = w.shape.dimensions[dnums.kernel_output_feature_dimension]
    rhs = add_instruction(comp, "reshape", [kernel], result_dims=(depth, features))
    product = add_instruction(comp, "dot", [lhs, rhs], {"lhs_batch_dims": (), "lhs_contracting_dims": (1,),
                                                         "rhs_batch_dims": (), "rhs_contracting_dims": (0,),
                                                         "operand_precision": ()})
    # [N*O..., F] -> [N, O..., F] -> the output's dimension order.
    nof = add_instruction(comp, "reshape", [product], result_dims=(n, *out_sizes, features))
    canonical = [dnums.output_batch_dimension, *dnums.output_spatial_dimensions, dnums.output_feature_dimension]
    return _transpose(comp, nof, [canonical.index(d) for d in range(len(canonical))])


def _pad_spatial(comp: HloComputation, inp: HloInstruction, window: tuple) -> HloInstruction:  # type: ignore[type-arg]
    """``inp`` (``[outer, S..., inner]``) padded with zeros by the window's spatial padding."""
    if not any(d.padding_low or d.padding_high for d in window):
        return inp
    zero = add_constant(comp, 0, inp.shape.element_type)
    padding = (PaddingDim(), *(PaddingDim(d.padding_low, d.padding_high) for d in window), PaddingDim())
    return add_instruction(comp, "pad", [inp, zero], {"padding": padding})


def _patches_by_kernel_offset(comp: HloComputation, inp: HloInstruction, out_sizes: list[int],
                              kernel_sizes: list[int], window: tuple) -> HloInstruction:  # type: ignore[type-arg]
    """One strided slice per kernel offset (all output positions at once), in row-major order of
    the offsets: few slices when the kernel is small (3x3: 9), the usual case."""
    n, c = inp.shape.dimensions[0], inp.shape.dimensions[-1]
    slices = []
    for offset in _offsets(kernel_sizes):
        spec = [SliceDim(0, n)]
        for k, o, d in zip(offset, out_sizes, window, strict=True):
            spec.append(SliceDim(k, k + (o - 1) * d.stride + 1, d.stride))
        spec.append(SliceDim(0, c))
        piece = add_instruction(comp, "slice", [inp], {"slice": tuple(spec)})
        # [N, O..., 1, C]: stacked along a new offset dimension, the patch matrix's rows need no
        # index arithmetic beyond the slices' (its reshape to 2-D is then a bitcast).
        slices.append(add_instruction(comp, "reshape", [piece], result_dims=(n, *out_sizes, 1, c)))
    if len(slices) == 1:
        return slices[0]
    return add_instruction(comp, "concatenate", slices, {"dimensions": (len(out_sizes) + 1,)})


def _patches_by_output_position(comp: HloComputation, inp: HloInstruction, out_sizes: list[int],
                                kernel_sizes: list[int], window: tuple) -> HloInstruction:  # type: ignore[type-arg]
    """One slice per *output position* (the whole window it reads): the same patch matrix, in
    fewer pieces when the output is smaller than the kernel -- a weight gradient, whose "kernel"
    is the output gradient (28x28 taps) and whose output is the 3x3 kernel: 9 slices, not 784."""
    n, c = inp.shape.dimensions[0], inp.shape.dimensions[-1]
    taps = math.prod(kernel_sizes) * c
    slices = []
    for position in _offsets(out_sizes):
        spec = [SliceDim(0, n)]
        for o, k, d in zip(position, kernel_sizes, window, strict=True):
            spec.append(SliceDim(o * d.stride, o * d.stride + k))
        spec.append(SliceDim(0, c))
        piece = add_instruction(comp, "slice", [inp], {"slice": tuple(spec)})
        slices.append(add_instruction(comp, "reshape", [piece], result_dims=(n, 1, taps)))  # [N, 1, (K..., C)]
    if len(slices) == 1:
        return slices[0]
    return add_instruction(comp, "concatenate", slices, {"dimensions": (1,)})  # [N, O, (K..., C)]


def _transpose(comp: HloComputation, x: HloInstruction, permutation: list[int]) -> HloInstruction:
    if permutation == sorted(permutation):
        return x
    return add_instruction(comp, "transpose", [x], {"dimensions": tuple(permutation)})


def _offsets(sizes: list[int]) -> list[tuple[int, ...]]:
    offsets: list[tuple[int, ...]] = [()]
    for size in sizes:
        offsets = [o + (k,) for o in offsets for k in range(size)]
    return offsets


def _guarded(comp: HloComputation, conv: HloInstruction, exact: set[int]) -> HloInstruction:
    """``conditional(every weight finite, im2col + dot, the convolution)``: padding cells take no
    part in a convolution's products (a NaN or inf weight over one adds nothing), but in the
    patch matrix they are zeros that the dot multiplies. With finite weights that adds exact
    zeros; a kernel holding NaN or inf runs the convolution as written."""
    x, w = conv.operands
    pred = Shape.array(PrimitiveType.PRED, ())
    both = HloComputation("and_reducer")
    a, b = both.add_parameter(pred, "a"), both.add_parameter(pred, "b")
    both.root_instruction = both.add_instruction(HloInstruction("and", pred, [a, b]))
    finite = add_instruction(comp, "is-finite", [w])
    all_finite = add_instruction(comp, "reduce", [finite, add_constant(comp, True, PrimitiveType.PRED)],
                                 {"dimensions": tuple(range(w.shape.rank)), "to_apply": both})
    packed = add_instruction(comp, "tuple", [x, w])
    branches = []
    for name in ("im2col_dot", "exact_convolution"):
        branch = HloComputation(f"{conv.name}.{name}")
        param = branch.add_parameter(packed.shape, "operands")
        bx = branch.add_instruction(HloInstruction("get-tuple-element", x.shape, [param], {"index": 0}), "x")
        bw = branch.add_instruction(HloInstruction("get-tuple-element", w.shape, [param], {"index": 1}), "w")
        if name == "im2col_dot":
            branch.root_instruction = _rewrite(branch, conv, bx, bw)
        else:
            branch.root_instruction = branch.add_instruction(conv.clone_with_new_operands(conv.shape, [bx, bw]))
            exact.add(branch.root_instruction.unique_id)  # stays a convolution
        branches.append(branch)
    for new in (both, *branches):
        add_callee(comp, new)
    return add_instruction(comp, "conditional", [all_finite, packed, packed],
                           {"true_computation": branches[0], "false_computation": branches[1]}, shape=conv.shape)


class ConvolutionToDot(HloPass):
    """Rewrites convolutions into im2col slices and one dot (module docstring)."""

    name = "convolution-to-dot"

    def __init__(self) -> None:
        super().__init__()
        self._exact: set[int] = set()  # the convolutions of the guards' exact branches

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for conv in [i for i in comp.instructions if i.opcode == "convolution" and i.unique_id not in self._exact]:
            why = _why_not(conv)
            if why is not None:
                self.note(f"{conv.name}: left as a convolution ({why})")
                continue
            name = conv.name
            padded = any(d.padding_low or d.padding_high for d in conv.attr("window").dimensions)
            new = _guarded(comp, conv, self._exact) if padded else _rewrite(comp, conv, *conv.operands)
            comp.replace_instruction(conv, new).name = name
            self.note(f"{name}: im2col patches x kernel as one dot" + (
                " (padded: when every weight is finite; else the convolution as written)" if padded else ""))
            changed = True
        return changed
