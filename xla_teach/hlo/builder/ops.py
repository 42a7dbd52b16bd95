"""Builder methods for data movement, reductions, windows, dot/convolution,
gather/scatter and sorting (XLA ``XlaBuilder`` names in snake_case).

Windowed ops take XLA's ``padding`` argument: ``"VALID"`` (no padding), ``"SAME"``
(output size ``ceil(input / stride)``, padding split evenly with the extra cell
at the end), or explicit ``(low, high)`` pairs per dimension.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from xla_teach.hlo.attributes import ConvDimensionNumbers, PaddingDim, SliceDim, Window
from xla_teach.hlo.builder.base import BuilderBase, XlaOp, exact_literal
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import dilated_bound
from xla_teach.hlo.types import PrimitiveType

Padding = str | Sequence[tuple[int, int]]


def _ints(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _ops(values: XlaOp | Sequence[XlaOp]) -> list[XlaOp]:
    return [values] if isinstance(values, XlaOp) else list(values)


def make_padding(input_dims: Sequence[int], window_dims: Sequence[int], strides: Sequence[int],
                 padding: Padding) -> list[tuple[int, int]]:
    """XLA's ``MakePadding``: ``(low, high)`` per dimension for "VALID", "SAME" or explicit pairs."""
    if not isinstance(padding, str):
        return [(int(lo), int(hi)) for lo, hi in padding]
    if padding == "VALID":
        return [(0, 0)] * len(input_dims)
    if padding != "SAME":
        raise ValueError(f"padding must be 'VALID', 'SAME' or (low, high) pairs, not {padding!r}")
    pads = []
    for size, window, stride in zip(input_dims, window_dims, strides, strict=True):
        out = math.ceil(size / stride)
        needed = max(0, (out - 1) * stride + window - size)
        pads.append((needed // 2, needed - needed // 2))
    return pads


class DataMovementMixin(BuilderBase):
    """broadcast, reshape, transpose, slices, concatenate, pad, reverse, copy, bitcast."""

    def broadcast(self, operand: XlaOp, broadcast_sizes: Sequence[int], *, name: str | None = None) -> XlaOp:
        """New major dims: ``f32[3]`` with sizes ``(2,)`` gives ``f32[2,3]``."""
        sizes = _ints(broadcast_sizes)
        dims = tuple(range(len(sizes), len(sizes) + operand.rank))
        return self._emit("broadcast", [operand], {"dimensions": dims}, name=name,
                          result_dims=sizes + operand.dimensions)

    def broadcast_in_dim(self, operand: XlaOp, out_dim_sizes: Sequence[int], broadcast_dimensions: Sequence[int],
                         *, name: str | None = None) -> XlaOp:
        """Operand dim i becomes output dim ``broadcast_dimensions[i]``; an operand dim of
        size 1 may stretch (lowered to ``reshape`` + ``broadcast``, as XLA does)."""
        mapping = _ints(broadcast_dimensions)
        if len(mapping) != operand.rank:
            raise ShapeError("broadcast", [operand.shape], f"broadcast_dimensions {list(mapping)} needs one entry "
                             f"per operand dimension")
        return self._broadcast_to(operand, _ints(out_dim_sizes), mapping, name=name, always=True)

    def reshape(self, operand: XlaOp, new_sizes: Sequence[int], *, name: str | None = None) -> XlaOp:
        return self._emit("reshape", [operand], name=name, result_dims=_ints(new_sizes))

    def transpose(self, operand: XlaOp, permutation: Sequence[int], *, name: str | None = None) -> XlaOp:
        return self._emit("transpose", [operand], {"dimensions": _ints(permutation)}, name=name)

    def slice(self, operand: XlaOp, start_indices: Sequence[int], limit_indices: Sequence[int],
              strides: Sequence[int] | None = None, *, name: str | None = None) -> XlaOp:
        strides = strides if strides is not None else [1] * len(start_indices)
        if not len(start_indices) == len(limit_indices) == len(strides):
            raise ShapeError("slice", [operand.shape], "start_indices, limit_indices and strides differ in length")
        spec = tuple(SliceDim(int(s), int(l), int(st)) for s, l, st in zip(start_indices, limit_indices, strides,
                                                                             strict=True))
        return self._emit("slice", [operand], {"slice": spec}, name=name)

    def slice_in_dim(self, operand: XlaOp, start_index: int, limit_index: int, stride: int, dimno: int, *,
                     name: str | None = None) -> XlaOp:
        """Slice one dimension, keep the others whole."""
        starts, limits, strides = [0] * operand.rank, list(operand.dimensions), [1] * operand.rank
        if not 0 <= dimno < operand.rank:
            raise ShapeError("slice", [operand.shape], f"dimension {dimno} is out of range")
        starts[dimno], limits[dimno], strides[dimno] = start_index, limit_index, stride
        return self.slice(operand, starts, limits, strides, name=name)

    def _start_indices(self, indices: Sequence[XlaOp | int]) -> list[XlaOp]:
        """Python ints become s32 constants."""
        return [i if isinstance(i, XlaOp) else self._constant(exact_literal(i, np.dtype(np.int32), "dynamic-slice"))
                for i in indices]

    def dynamic_slice(self, operand: XlaOp, start_indices: Sequence[XlaOp | int], slice_sizes: Sequence[int], *,
                      name: str | None = None) -> XlaOp:
        """One scalar start index per dimension (clamped at run time so the slice fits)."""
        indices = self._start_indices(start_indices)
        return self._emit("dynamic-slice", [operand, *indices], {"dynamic_slice_sizes": _ints(slice_sizes)},
                          name=name)

    def dynamic_update_slice(self, operand: XlaOp, update: XlaOp, start_indices: Sequence[XlaOp | int], *,
                             name: str | None = None) -> XlaOp:
        indices = self._start_indices(start_indices)
        return self._emit("dynamic-update-slice", [operand, update, *indices], name=name)

    def concat_in_dim(self, operands: Sequence[XlaOp], dimension: int, *, name: str | None = None) -> XlaOp:
        return self._emit("concatenate", list(operands), {"dimensions": (int(dimension),)}, name=name)

    def pad(self, operand: XlaOp, padding_value: XlaOp, padding_config: Sequence[PaddingDim | Sequence[int]], *,
            name: str | None = None) -> XlaOp:
        """``padding_config``: per dimension a PaddingDim or ``(low, high[, interior])``;
        negative low/high remove elements."""
        for p in padding_config:
            if not isinstance(p, PaddingDim) and len(p) not in (2, 3):
                raise ShapeError("pad", [operand.shape], f"a padding entry is (low, high) or (low, high, interior), "
                                 f"got {tuple(p)}")
        config = tuple(p if isinstance(p, PaddingDim) else PaddingDim(*(int(v) for v in p)) for p in padding_config)
        return self._emit("pad", [operand, padding_value], {"padding": config}, name=name)

    def pad_in_dim(self, operand: XlaOp, padding_value: XlaOp, dimno: int, pad_lo: int, pad_hi: int, *,
                   name: str | None = None) -> XlaOp:
        if not 0 <= dimno < operand.rank:
            raise ShapeError("pad", [operand.shape], f"pad_in_dim: dimension {dimno} is out of range for rank "
                             f"{operand.rank}")
        config = [PaddingDim()] * operand.rank
        config[dimno] = PaddingDim(pad_lo, pad_hi)
        return self.pad(operand, padding_value, config, name=name)

    def rev(self, operand: XlaOp, dimensions: Sequence[int], *, name: str | None = None) -> XlaOp:
        return self._emit("reverse", [operand], {"dimensions": _ints(dimensions)}, name=name)

    def copy(self, operand: XlaOp, *, name: str | None = None) -> XlaOp:
        return self._emit("copy", [operand], name=name)

    def bitcast(self, operand: XlaOp, shape: Shape, *, name: str | None = None) -> XlaOp:
        """Reinterpret the buffer with ``shape`` (same byte size). Normally made by
        layout-aware passes, not by front ends."""
        return self._emit("bitcast", [operand], name=name, declared_shape=shape)

    concatenate = concat_in_dim
    reverse = rev


class ReductionMixin(BuilderBase):
    """reduce, reduce_window, select_and_scatter, dot, convolution, gather, scatter, sort, top_k."""

    def reduce(self, operands: XlaOp | Sequence[XlaOp], init_values: XlaOp | Sequence[XlaOp],
               computation: HloComputation, dimensions_to_reduce: Sequence[int], *,
               name: str | None = None) -> XlaOp:
        """Reduce N operands with N init values; a tuple-shaped op when N > 1."""
        comp = self._check_computation(computation, "reduce", "to_apply")
        attrs = {"dimensions": _ints(dimensions_to_reduce), "to_apply": comp}
        return self._emit("reduce", _ops(operands) + _ops(init_values), attrs, name=name)

    def _window(self, opcode: str, base: XlaOp | Sequence[int], window_dimensions: Sequence[int],
                window_strides: Sequence[int] | None, padding: Padding, base_dilations: Sequence[int] | None,
                window_dilations: Sequence[int] | None) -> Window:
        """A Window over ``base`` (an op, or the spatial dims of a convolution input)."""
        base_dims = list(base.dimensions) if isinstance(base, XlaOp) else list(base)
        rank = len(window_dimensions)
        if len(base_dims) != rank:
            shapes = [base.shape] if isinstance(base, XlaOp) else []
            raise ShapeError(opcode, shapes, f"the window has {rank} dimensions but the operand has {len(base_dims)}")
        strides = list(window_strides) if window_strides is not None else [1] * rank
        base_dil = list(base_dilations) if base_dilations is not None else [1] * rank
        win_dil = list(window_dilations) if window_dilations is not None else [1] * rank
        dilated_base = [dilated_bound(n, d) for n, d in zip(base_dims, base_dil, strict=True)]
        dilated_window = [dilated_bound(n, d) for n, d in zip(window_dimensions, win_dil, strict=True)]
        pads = make_padding(dilated_base, dilated_window, strides, padding)
        return Window.make(window_dimensions, strides, pads, base_dil, win_dil)

    def reduce_window(self, operands: XlaOp | Sequence[XlaOp], init_values: XlaOp | Sequence[XlaOp],
                      computation: HloComputation, window_dimensions: Sequence[int],
                      window_strides: Sequence[int] | None = None, padding: Padding = "VALID",
                      base_dilations: Sequence[int] | None = None, window_dilations: Sequence[int] | None = None, *,
                      name: str | None = None) -> XlaOp:
        comp = self._check_computation(computation, "reduce-window", "to_apply")
        inputs = _ops(operands)
        window = self._window("reduce-window", inputs[0], window_dimensions, window_strides, padding,
                              base_dilations, window_dilations)
        return self._emit("reduce-window", inputs + _ops(init_values), {"window": window, "to_apply": comp},
                          name=name)

    def select_and_scatter(self, operand: XlaOp, select: HloComputation, window_dimensions: Sequence[int],
                           window_strides: Sequence[int] | None, padding: Padding, source: XlaOp,
                           init_value: XlaOp, scatter: HloComputation, *, name: str | None = None) -> XlaOp:
        """Per window of ``operand`` pick one element with ``select``, then combine the
        window's ``source`` value into it with ``scatter`` (max-pool gradients)."""
        attrs = {
            "window": self._window("select-and-scatter", operand, window_dimensions, window_strides, padding,
                                   None, None),
            "select": self._check_computation(select, "select-and-scatter", "select"),
            "scatter": self._check_computation(scatter, "select-and-scatter", "scatter"),
        }
        return self._emit("select-and-scatter", [operand, source, init_value], attrs, name=name)

    def dot_general(self, lhs: XlaOp, rhs: XlaOp, lhs_contracting_dims: Sequence[int],
                    rhs_contracting_dims: Sequence[int], lhs_batch_dims: Sequence[int] = (),
                    rhs_batch_dims: Sequence[int] = (), *, preferred_element_type: PrimitiveType | str | None = None,
                    operand_precision: Sequence[str] = (), name: str | None = None) -> XlaOp:
        """Output dims: batch, lhs free, rhs free."""
        attrs = {
            "lhs_batch_dims": _ints(lhs_batch_dims), "lhs_contracting_dims": _ints(lhs_contracting_dims),
            "rhs_batch_dims": _ints(rhs_batch_dims), "rhs_contracting_dims": _ints(rhs_contracting_dims),
            "operand_precision": tuple(operand_precision),
        }
        etype = PrimitiveType.from_name(preferred_element_type) if isinstance(preferred_element_type, str) \
            else preferred_element_type
        return self._emit("dot", [lhs, rhs], attrs, name=name, result_element_type=etype)

    def dot(self, lhs: XlaOp, rhs: XlaOp, *, preferred_element_type: PrimitiveType | str | None = None,
            name: str | None = None) -> XlaOp:
        """Vector/matrix product: contracts lhs's last dim with rhs's first."""
        if lhs.rank not in (1, 2) or rhs.rank not in (1, 2):
            raise ShapeError("dot", [lhs.shape, rhs.shape], "dot takes rank-1 or rank-2 operands; use dot_general")
        return self.dot_general(lhs, rhs, (lhs.rank - 1,), (0,), preferred_element_type=preferred_element_type,
                                name=name)

    def conv_general_dilated(self, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int], padding: Padding,
                             lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                             dim_labels: str = "b01f_01io->b01f", feature_group_count: int = 1,
                             batch_group_count: int = 1, *, preferred_element_type: PrimitiveType | str | None = None,
                             name: str | None = None) -> XlaOp:
        """Convolution; ``dim_labels`` names the roles of the dims (``bf01_oi01->bf01`` = NCHW)."""
        dnums = ConvDimensionNumbers.from_text(dim_labels)
        rank = len(dnums.input_spatial_dimensions) + 2
        if lhs.rank != rank or rhs.rank != rank:
            raise ShapeError("convolution", [lhs.shape, rhs.shape], f"dim_labels={dim_labels} describes rank-{rank} "
                             "arrays")
        base = [lhs.dimensions[d] for d in dnums.input_spatial_dimensions]
        kernel = [rhs.dimensions[d] for d in dnums.kernel_spatial_dimensions]
        window = self._window("convolution", base, kernel, window_strides, padding, lhs_dilation, rhs_dilation)
        attrs = {"window": window, "dim_labels": dnums, "feature_group_count": int(feature_group_count),
                 "batch_group_count": int(batch_group_count)}
        etype = PrimitiveType.from_name(preferred_element_type) if isinstance(preferred_element_type, str) \
            else preferred_element_type
        return self._emit("convolution", [lhs, rhs], attrs, name=name, result_element_type=etype)

    def gather(self, operand: XlaOp, start_indices: XlaOp, offset_dims: Sequence[int],
               collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int], index_vector_dim: int,
               slice_sizes: Sequence[int], operand_batching_dims: Sequence[int] = (),
               start_indices_batching_dims: Sequence[int] = (), indices_are_sorted: bool = False, *,
               name: str | None = None) -> XlaOp:
        attrs = {
            "offset_dims": _ints(offset_dims), "collapsed_slice_dims": _ints(collapsed_slice_dims),
            "start_index_map": _ints(start_index_map), "operand_batching_dims": _ints(operand_batching_dims),
            "start_indices_batching_dims": _ints(start_indices_batching_dims),
            "index_vector_dim": int(index_vector_dim), "slice_sizes": _ints(slice_sizes),
            "indices_are_sorted": bool(indices_are_sorted),
        }
        return self._emit("gather", [operand, start_indices], attrs, name=name)

    def scatter(self, operands: XlaOp | Sequence[XlaOp], scatter_indices: XlaOp, updates: XlaOp | Sequence[XlaOp],
                update_computation: HloComputation, update_window_dims: Sequence[int],
                inserted_window_dims: Sequence[int], scatter_dims_to_operand_dims: Sequence[int],
                index_vector_dim: int, input_batching_dims: Sequence[int] = (),
                scatter_indices_batching_dims: Sequence[int] = (), indices_are_sorted: bool = False,
                unique_indices: bool = False, *, name: str | None = None) -> XlaOp:
        attrs = {
            "update_window_dims": _ints(update_window_dims), "inserted_window_dims": _ints(inserted_window_dims),
            "scatter_dims_to_operand_dims": _ints(scatter_dims_to_operand_dims),
            "input_batching_dims": _ints(input_batching_dims),
            "scatter_indices_batching_dims": _ints(scatter_indices_batching_dims),
            "index_vector_dim": int(index_vector_dim), "indices_are_sorted": bool(indices_are_sorted),
            "unique_indices": bool(unique_indices),
            "to_apply": self._check_computation(update_computation, "scatter", "to_apply"),
        }
        return self._emit("scatter", _ops(operands) + [scatter_indices] + _ops(updates), attrs, name=name)

    def sort(self, operands: XlaOp | Sequence[XlaOp], comparator: HloComputation, dimension: int = -1,
             is_stable: bool = False, *, name: str | None = None) -> XlaOp:
        """Sort along ``dimension`` (-1: the last); all operands move together."""
        ops = _ops(operands)
        dim = dimension + ops[0].rank if dimension < 0 else dimension
        attrs = {"dimensions": (int(dim),), "is_stable": bool(is_stable),
                 "to_apply": self._check_computation(comparator, "sort", "to_apply")}
        return self._emit("sort", ops, attrs, name=name)

    def top_k(self, operand: XlaOp, k: int, largest: bool = True, *, name: str | None = None) -> XlaOp:
        """``(values, s32 indices)`` of the k largest (or smallest) along the last dim."""
        return self._emit("topk", [operand], {"k": int(k), "largest": bool(largest)}, name=name)
