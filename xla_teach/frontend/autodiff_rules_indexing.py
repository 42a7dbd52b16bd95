"""Reverse-mode rules for ``gather``, ``scatter`` (``x.at[...]``) and ``sort``.

The transpose of a gather is a scatter-add into zeros, and the cotangent of a
scatter's ``updates`` is a gather of the output cotangent at the positions the
updates went to. How the rest of the cotangent splits depends on the combiner:

==========  ===============================  ===========================================
``mode``    d out / d x                      d out / d updates[k]
==========  ===============================  ===========================================
``set``     0 where overwritten, else 1      1 (if the update landed)
``add``     1                                1
``mul``     product of the updates there     ``out / updates[k]`` (not defined at 0)
``min/max`` shared among the values equal    as for ``x``: the updates equal to ``out``
            to ``out`` (ties split evenly)   share the cotangent with ``x``
==========  ===============================  ===========================================

Updates whose index is out of range are dropped by a scatter (a gather would clamp
it), so they get no cotangent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xla_teach.frontend import lax_ops as L
from xla_teach.frontend import primitives as P
from xla_teach.frontend.autodiff_rules import defvjp
from xla_teach.frontend.tracer import Tracer, bind


@defvjp("gather")
def _gather(ct: Tracer, xs: list[Tracer], out: Tracer, offset_dims: Sequence[int],
            collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int],
            slice_sizes: Sequence[int]) -> list[Tracer | None]:
    """The transpose of a gather is a scatter-add of the cotangent into zeros."""
    x, indices = xs
    ct_x = bind(P.scatter_p, L.full(x.shape, 0, x.dtype), indices, ct, mode="add", update_window_dims=offset_dims,
                inserted_window_dims=collapsed_slice_dims, scatter_dims_to_operand_dims=start_index_map)
    return [ct_x, None]


class _ScatterGeometry:
    """A scatter's dimension numbers, to read values back at the updates' positions."""

    def __init__(self, x: Tracer, indices: Tracer, updates: Tracer, update_window_dims: Sequence[int],
                 inserted_window_dims: Sequence[int], scatter_dims_to_operand_dims: Sequence[int]) -> None:
        self.indices = indices
        self.updates_shape = updates.shape
        self.dims = dict(update_window_dims=tuple(update_window_dims),
                         inserted_window_dims=tuple(inserted_window_dims),
                         scatter_dims_to_operand_dims=tuple(scatter_dims_to_operand_dims))
        window_dims = [d for d in range(x.ndim) if d not in inserted_window_dims]
        self.slice_sizes = [1] * x.ndim
        for k, d in enumerate(window_dims):
            self.slice_sizes[d] = updates.shape[update_window_dims[k]]
        self.valid = self._valid_mask(x, indices, updates, update_window_dims, scatter_dims_to_operand_dims)

    def _valid_mask(self, x: Tracer, indices: Tracer, updates: Tracer, update_window_dims: Sequence[int],
                    scatter_dims_to_operand_dims: Sequence[int]) -> Tracer | None:
        """True (broadcast to the updates' shape) where the update lands inside ``x``."""
        valid = None
        for k, d in enumerate(scatter_dims_to_operand_dims):
            column = bind(P.slice_p, indices, start=(0,) * (indices.ndim - 1) + (k,),
                          limit=indices.shape[:-1] + (k + 1,), strides=(1,) * indices.ndim)
            column = bind(P.reshape_p, column, new_sizes=indices.shape[:-1])
            ok = L.logical_and(L.compare(column, 0, "GE"), L.compare(column, x.shape[d] - self.slice_sizes[d], "LE"))
            valid = ok if valid is None else L.logical_and(valid, ok)
        if valid is None:
            return None
        batch_dims = tuple(d for d in range(updates.ndim) if d not in update_window_dims)
        return bind(P.broadcast_in_dim_p, valid, shape=updates.shape, dims=batch_dims)

    def gather(self, v: Tracer) -> Tracer:
        """``v`` (shaped like ``x``) read at each update's position; 0 for dropped updates."""
        got = bind(P.gather_p, v, self.indices, offset_dims=self.dims["update_window_dims"],
                   collapsed_slice_dims=self.dims["inserted_window_dims"],
                   start_index_map=self.dims["scatter_dims_to_operand_dims"], slice_sizes=tuple(self.slice_sizes))
        return got if self.valid is None else L.select(self.valid, got, L.zeros_like(got))

    def scatter(self, base: Tracer, updates: Tracer, mode: str) -> Tracer:
        return bind(P.scatter_p, base, self.indices, updates, mode=mode, **self.dims)


@defvjp("scatter")
def _scatter(ct: Tracer, xs: list[Tracer], out: Tracer, mode: str, update_window_dims: Sequence[int],
             inserted_window_dims: Sequence[int], scatter_dims_to_operand_dims: Sequence[int]) -> list[Any]:
    x, indices, updates = xs
    geo = _ScatterGeometry(x, indices, updates, update_window_dims, inserted_window_dims,
                           scatter_dims_to_operand_dims)
    if mode == "add":
        return [ct, None, geo.gather(ct)]
    if mode == "set":
        return [geo.scatter(ct, L.zeros_like(updates), "set"), None, geo.gather(ct)]
    if mode == "mul":
        factor = geo.scatter(L.ones_like(x), updates, "mul")  # the product of the updates landing at each spot
        return [L.mul(ct, factor), None, L.div(geo.gather(L.mul(ct, out)), updates)]
    # min / max: every value equal to the result shares its cotangent.
    x_hits = L.convert(L.compare(x, out, "EQ"), ct.dtype)
    u_hits = L.convert(L.compare(updates, geo.gather(out), "EQ"), ct.dtype)
    if geo.valid is not None:
        u_hits = L.select(geo.valid, u_hits, L.zeros_like(u_hits))
    count = L.add(x_hits, geo.scatter(L.zeros_like(x), u_hits, "add"))
    share = L.div(ct, count)
    return [L.mul(share, x_hits), None, L.mul(geo.gather(share), u_hits)]


@defvjp("sort", single=False)
def _sort(cts: list[Tracer | None], xs: list[Tracer], outs: list[Tracer], dimension: int) -> list[Tracer | None]:
    """Values moved from position perm[j] to j; their cotangents move back by sorting them by
    ``perm`` (the sorted positions), which puts the one at j at perm[j]."""
    perm = outs[-1]
    present = [ct for ct in cts if ct is not None]
    moved = iter(L.sort_by(perm, *present, dimension=dimension) if present else [])
    return [None if ct is None else next(moved) for ct in cts]
