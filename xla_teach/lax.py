"""``xla_teach.lax`` -- JAX's ``jax.lax`` names: control flow, and collectives by mesh axis name
for ``shard_map``.

    from xla_teach.lax import fori_loop, scan, cond
    from xla_teach.lax import psum, all_gather, ppermute, axis_index

See :mod:`xla_teach.frontend.control_flow` and :mod:`xla_teach.frontend.shard_map`.
"""

from xla_teach.frontend.control_flow import cond, fori_loop, scan, switch, while_loop  # noqa: F401
from xla_teach.frontend.shard_map import (  # noqa: F401
    all_gather,
    all_to_all,
    axis_index,
    pmax,
    pmin,
    ppermute,
    psum,
    psum_scatter,
)
from xla_teach.frontend.sharding import with_sharding_constraint  # noqa: F401

__all__ = ["all_gather", "all_to_all", "axis_index", "cond", "fori_loop", "pmax", "pmin", "ppermute", "psum",
           "psum_scatter", "scan", "switch", "while_loop", "with_sharding_constraint"]
