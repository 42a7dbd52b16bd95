"""Rewrite a ``convolution`` as one matrix product of its patches (``convolution-im2col``, GPU).

The GPU has no convolution kernel of its own: a loop kernel gave each output element its whole
window sum, reading the input again for every output feature (a 3x3 convolution of 8x56x56x64
took 0.46 ms on an H200, XLA 0.016 ms). Its dot kernels are fast, and a convolution *is* a
product once the input is laid out as patches ("im2col"): for a window of ``K`` positions, the
input is padded (and dilated) as the window says, ``K`` strided slices take each window
position's element for every output position, and concatenated along the features they give
``patches[b, o..., K*C]``; the kernel, its window positions and input features merged, is a
``[K*C, O]`` matrix; ``dot(patches, kernel)`` is the convolution, then transposed to its output's
dimension order. ``dot_decomposer`` then merges the batch and output positions into the rows of
one product. The patches cost ``K`` times the input's memory, so only windows of at most 32
positions are rewritten (a weight gradient's window is the whole image: it stays as it is), and
only ungrouped convolutions.

Before::

    ENTRY main {
      x = f32[1,4,4,2] parameter(0)
      w = f32[2,2,2,3] parameter(1)
      ROOT c = f32[1,3,3,3] convolution(x, w), window={size=2x2}, dim_labels=b01f_01io->b01f
    }

After::

    ENTRY main {
      x = f32[1,4,4,2] parameter(0)
      slice = f32[1,3,3,2] slice(x), slice={[0:1], [0:3], [0:3], [0:2]}
      slice.1 = f32[1,3,3,2] slice(x), slice={[0:1], [0:3], [1:4], [0:2]}
      slice.2 = f32[1,3,3,2] slice(x), slice={[0:1], [1:4], [0:3], [0:2]}
      slice.3 = f32[1,3,3,2] slice(x), slice={[0:1], [1:4], [1:4], [0:2]}
      patches = f32[1,3,3,8] concatenate(slice, slice.1, slice.2, slice.3), dimensions={3}
      w = f32[2,2,2,3] parameter(1)
      kernel = f32[8,3] reshape(w)
      ROOT c = f32[1,3,3,3] dot(patches, kernel), lhs_contracting_dims={3}, rhs_contracting_dims={0}
    }
"""

from __future__ import annotations

import itertools
import math

from xla_teach.hlo.attributes import PaddingDim, SliceDim
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, add_instruction, transposed

MAX_WINDOW = 32  # window positions: the patches take this many times the input's memory


class ConvolutionIm2col(HloPass):
    name = "convolution-im2col"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for conv in [i for i in comp.instructions if i.opcode == "convolution"]:
                problem = self.refusal(conv)
                if problem:
                    self.note(f"{conv.name}: kept ({problem})")
                    continue
                self._rewrite(comp, conv)
                changed = True
        return changed

    @staticmethod
    def refusal(conv: HloInstruction) -> str | None:
        """Why ``conv`` is not rewritten, or None."""
        window = conv.attr("window").dimensions
        if conv.attr("feature_group_count") != 1 or conv.attr("batch_group_count") != 1:
            return "grouped"
        if math.prod(w.size for w in window) > MAX_WINDOW:
            return f"a window of {math.prod(w.size for w in window)} positions (more than {MAX_WINDOW})"
        types = {conv.shape.element_type, *(o.shape.element_type for o in conv.operands)}
        if len(types) != 1 or not conv.shape.element_type.is_float:
            return "mixed or integer element types"
        if conv.shape.element_count() == 0 or any(o.shape.element_count() == 0 for o in conv.operands):
            return "empty"
        return None

    def _rewrite(self, comp: HloComputation, conv: HloInstruction) -> None:
        lhs, rhs = conv.operands
        dn = conv.attr("dim_labels")
        window = conv.attr("window").dimensions
        k = len(window)
        added: list[HloInstruction] = []
        # Input as [batch, spatial..., feature], padded and dilated as the window says.
        x = transposed(comp, lhs, [dn.input_batch_dimension, *dn.input_spatial_dimensions,
                                    dn.input_feature_dimension])
        added.append(x)
        if any(w.padding_low or w.padding_high or w.base_dilation > 1 for w in window):
            zero = add_constant(comp, 0, x.shape.element_type, name="zero")
            padding = (PaddingDim(), *(PaddingDim(w.padding_low, w.padding_high, w.base_dilation - 1) for w in window),
                       PaddingDim())
            x = add_instruction(comp, "pad", [x, zero], {"padding": padding})
            added += [zero, x]
        batch, channels = x.shape.dimensions[0], x.shape.dimensions[-1]
        outputs = [conv.shape.dimensions[d] for d in dn.output_spatial_dimensions]
        slices = []
        for position in itertools.product(*(range(w.size) for w in window)):
            starts = [j * w.window_dilation for j, w in zip(position, window, strict=True)]
            spec = (SliceDim(0, batch),
                    *(SliceDim(s, s + (o - 1) * w.stride + 1, w.stride) for s, o, w in zip(starts, outputs, window,
                                                                                          strict=True)),
                    SliceDim(0, channels))
            slices.append(add_instruction(comp, "slice", [x], {"slice": spec}))
        patches = slices[0] if len(slices) == 1 else add_instruction(comp, "concatenate", slices,
                                                                      {"dimensions": (k + 1,)}, name="patches")
        added += slices + [patches]
        # Kernel as [window positions * input features, output features], window reversal undone.
        kernel = transposed(comp, rhs, [*dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
                                         dn.kernel_output_feature_dimension])
        added.append(kernel)
        reversed_dims = tuple(d for d, w in enumerate(window) if w.window_reversal)
        if reversed_dims:
            kernel = add_instruction(comp, "reverse", [kernel], {"dimensions": reversed_dims})
            added.append(kernel)
        out_features = kernel.shape.dimensions[-1]
        kernel = add_instruction(comp, "reshape", [kernel], result_dims=[len(slices) * channels, out_features],
                                 name="kernel")
        added.append(kernel)
        attrs: dict[str, object] = {"lhs_contracting_dims": (k + 1,), "rhs_contracting_dims": (0,)}
        if conv.attr("operand_precision"):
            attrs["operand_precision"] = conv.attr("operand_precision")
        product = add_instruction(comp, "dot", [patches, kernel], attrs)
        added.append(product)
        # The product is [batch, spatial..., feature]; the convolution's output may be in any order.
        order = [0] * conv.shape.rank
        order[dn.output_batch_dimension] = 0
        order[dn.output_feature_dimension] = k + 1
        for d, out_dim in enumerate(dn.output_spatial_dimensions):
            order[out_dim] = d + 1
        result = transposed(comp, product, order)
        added.append(result)
        for new in added:
            if new.parent is comp and new not in (lhs, rhs):
                new.metadata = conv.metadata  # the convolution's op_name and line: the work is its
        self.note(f"{conv.name}: {len(slices)} window positions x {channels} features -> one product")
        name = conv.name
        comp.replace_instruction(conv, result).name = name
