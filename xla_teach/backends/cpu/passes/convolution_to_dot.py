"""JAX's weight gradients as one transposed dot per output position (``convolution-to-dot``).

JAX writes the weight gradient of a convolution as another convolution: the input, read as
``[C, S..., N]`` (features first, batch last: ``f01b``), against the output gradient as its
"kernel" (``[I, K..., O]``: ``i01o``). Its window is the whole image (28x28 taps for a 28x28
output) and its output is the small kernel (3x3): few output positions, huge windows. The patch
matrix of the CPU's im2col kernel would then be mostly copies; instead each output position's
window is a slice ``[C, K..., N]`` of the input *as it lies in memory*, and contracting its rows
``(C, K...)`` with the gradient's rows ``(I, K...)`` gives that position's ``[N, O]`` -- the
transposed product BLAS computes from the same bytes, with no transpose of the input at all::

    out[o, n, f] = sum over (c, k) of x[c, o + k, n] * w[c, k, f]

For a 3x3 weight gradient over 8x28x28x32 that is 9 dots (315 ms element by element -> 4 ms).
The sums are the same terms in another order, so results agree with the interpreter to rounding.

Every other convolution goes to the blocked im2col kernel (``conv-canonicalization``). A padded
weight gradient is guarded as there: the dots when every weight is finite, else the convolution
as written (padding cells take no part in a convolution's products, but the dots multiply them).

Before::

    ENTRY main {
      x = f32[2,4,3] parameter(0)
      dy = f32[2,3,5] parameter(1)
      ROOT dw = f32[2,3,5] convolution(x, dy), window={size=3}, dim_labels=f0b_i0o->0bf
    }

After::

    ENTRY main {
      x = f32[2,4,3] parameter(0)
      slice = f32[2,3,3] slice(x), slice={[0:2], [0:3], [0:3]}
      reshape.1 = f32[6,3] reshape(slice)
      dy = f32[2,3,5] parameter(1)
      reshape = f32[6,5] reshape(dy)
      dot = f32[3,5] dot(reshape.1, reshape), lhs_contracting_dims={0}, rhs_contracting_dims={0}
      reshape.2 = f32[1,3,5] reshape(dot)
      slice.1 = f32[2,3,3] slice(x), slice={[0:2], [1:4], [0:3]}
      reshape.3 = f32[6,3] reshape(slice.1)
      dot.1 = f32[3,5] dot(reshape.3, reshape), lhs_contracting_dims={0}, rhs_contracting_dims={0}
      reshape.4 = f32[1,3,5] reshape(dot.1)
      concatenate = f32[2,3,5] concatenate(reshape.2, reshape.4), dimensions={0}
      ROOT dw = f32[2,3,5] reshape(concatenate)
    }
"""

from __future__ import annotations

import math

from xla_teach.backends.cpu.kernels.convolution import conv_strategy
from xla_teach.backends.cpu.passes.conv_canonicalization import guarded, needs_guard, transpose
from xla_teach.hlo.attributes import PaddingDim, SliceDim
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, add_instruction


def _why_not(conv: HloInstruction) -> str | None:
    if conv_strategy(conv):
        return "its strategy is chosen"
    if not _is_weight_gradient(conv):
        return "not a weight gradient"
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
    return transpose(comp, onf, [canonical.index(d) for d in range(len(canonical))])


def _pad_spatial(comp: HloComputation, inp: HloInstruction, window: tuple) -> HloInstruction:  # type: ignore[type-arg]
    """``inp`` (``[outer, S..., inner]``) padded with zeros by the window's spatial padding."""
    if not any(d.padding_low or d.padding_high for d in window):
        return inp
    zero = add_constant(comp, 0, inp.shape.element_type)
    padding = (PaddingDim(), *(PaddingDim(d.padding_low, d.padding_high) for d in window), PaddingDim())
    return add_instruction(comp, "pad", [inp, zero], {"padding": padding})


def _offsets(sizes: list[int]) -> list[tuple[int, ...]]:
    offsets: list[tuple[int, ...]] = [()]
    for size in sizes:
        offsets = [o + (k,) for o in offsets for k in range(size)]
    return offsets


class ConvolutionToDot(HloPass):
    """Rewrites JAX's weight gradients into one dot per output position (module docstring)."""

    name = "convolution-to-dot"

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for conv in [i for i in comp.instructions if i.opcode == "convolution"]:
            why = _why_not(conv)
            if why is not None:
                self.note(f"{conv.name}: left as a convolution ({why})")
                continue
            name = conv.name
            guard = needs_guard(conv)
            new = guarded(comp, conv, _rewrite_weight_gradient) if guard else _rewrite_weight_gradient(
                comp, conv, *conv.operands)
            comp.replace_instruction(conv, new).name = name
            self.note(f"{name}: a weight gradient, one dot per output position" + (
                " (padded: when every weight is finite; else the convolution as written)" if guard else ""))
            changed = True
        return changed
