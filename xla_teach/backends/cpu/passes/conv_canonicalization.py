"""Put every convolution in the layout the CPU's im2col kernel reads (``conv-canonicalization``).

The CPU computes a convolution with blocked im2col and BLAS (``backends/cpu/kernels/convolution.py``),
which reads the input as ``[batch, spatial..., features]``, the kernel as
``[spatial..., in_features, out_features]`` and writes ``[batch, spatial..., out_features]``:
then a run of input features is contiguous, the kernel is already the right-hand matrix and the
output the product's rows. This pass (named after XLA CPU's ``ConvCanonicalization``, which does
the same for Eigen) transposes operands and result of any other convolution into that order and
marks the convolution ``"conv_strategy":"im2col_gemm"`` in its backend_config, so the optimized HLO
shows the path chosen. NCHW (``bf01_oi01->bf01``) gets three transposes; JAX's NHWC/HWIO
convolutions none.

A convolution that reads padding stays exact when a weight is NaN or inf (padding must not meet
it): the kernel checks its weights at run time and computes such a call element by element (see
the kernel's docstring), so the HLO holds one convolution either way.

Grouped convolutions, reversed windows and element types other than f32/f64 are left to the
element-by-element loop (the pass notes say which and why).

Before::

    ENTRY main {
      x = f32[1,2,5,5] parameter(0)
      w = f32[4,2,3,3] parameter(1)
      ROOT c = f32[1,4,3,3] convolution(x, w), window={size=3x3}, dim_labels=bf01_oi01->bf01
    }

After::

    ENTRY main {
      x = f32[1,2,5,5] parameter(0)
      transpose = f32[1,5,5,2] transpose(x), dimensions={0,2,3,1}
      w = f32[4,2,3,3] parameter(1)
      transpose.1 = f32[3,3,2,4] transpose(w), dimensions={2,3,1,0}
      convolution = f32[1,3,3,4] convolution(transpose, transpose.1), window={size=3x3},
          dim_labels=b01f_01io->b01f, backend_config={"conv_strategy":"im2col_gemm"}
      ROOT c = f32[1,4,3,3] transpose(convolution), dimensions={0,3,1,2}
    }
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.backends.cpu.kernels.convolution import IM2COL_GEMM, conv_strategy, im2col_unsupported, reads_padding
from xla_teach.hlo.attributes import ConvDimensionNumbers
from xla_teach.hlo.backend_config import set_backend_config_field
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.shape import Shape
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction

Rewrite = Callable[[HloComputation, HloInstruction, HloInstruction, HloInstruction], HloInstruction]


def set_conv_strategy(conv: HloInstruction, strategy: str) -> None:
    # (replace_unreadable: the choice must be visible; a convolution's config is xla_teach's own)
    set_backend_config_field(conv, "conv_strategy", strategy, replace_unreadable=True)


def transpose(comp: HloComputation, x: HloInstruction, permutation: list[int]) -> HloInstruction:
    """``x`` transposed by ``permutation`` (``x`` itself for the identity)."""
    if permutation == sorted(permutation):
        return x
    return add_instruction(comp, "transpose", [x], {"dimensions": tuple(permutation)})


def canonical_convolution(comp: HloComputation, conv: HloInstruction, x: HloInstruction,
                          w: HloInstruction) -> HloInstruction:
    """``conv`` of ``x`` and ``w`` in the canonical layout, marked ``im2col_gemm``, between transposes."""
    d = conv.attr("dim_labels")
    spatial = "".join(str(i) for i in range(len(d.input_spatial_dimensions)))
    xin = transpose(comp, x, [d.input_batch_dimension, *d.input_spatial_dimensions, d.input_feature_dimension])
    win = transpose(comp, w, [*d.kernel_spatial_dimensions, d.kernel_input_feature_dimension,
                              d.kernel_output_feature_dimension])
    out_order = [d.output_batch_dimension, *d.output_spatial_dimensions, d.output_feature_dimension]
    attrs = dict(conv.attrs)
    attrs["dim_labels"] = ConvDimensionNumbers.from_text(f"b{spatial}f_{spatial}io->b{spatial}f")
    shape = Shape.array(conv.shape.element_type, tuple(conv.shape.dimensions[i] for i in out_order))
    new = add_instruction(comp, "convolution", [xin, win], attrs, shape=shape)
    set_conv_strategy(new, IM2COL_GEMM)
    return transpose(comp, new, [out_order.index(i) for i in range(len(out_order))])


class ConvCanonicalization(HloPass):
    """Canonical layout + ``im2col_gemm`` for every convolution the kernel can compute."""

    name = "conv-canonicalization"

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for conv in [i for i in comp.instructions if i.opcode == "convolution" and not conv_strategy(i)]:
            why = im2col_unsupported(conv)
            if why is None and conv.operand(1).shape.element_count() == 0:
                why = "empty kernel"
            if why is not None:
                self.note(f"{conv.name}: left to the element loop ({why})")
                continue
            name = conv.name
            new = canonical_convolution(comp, conv, *conv.operands)
            comp.replace_instruction(conv, new).name = name
            self.note(f"{name}: blocked im2col + gemm" + (
                " (reads padding: element by element in a call with a non-finite weight)"
                if reads_padding(conv) else ""))
            changed = True
        return changed
