"""``xla_teach.lax`` -- collectives by mesh axis name for ``shard_map`` (JAX's ``jax.lax`` names).

    from xla_teach.lax import psum, all_gather, ppermute, axis_index

See :mod:`xla_teach.frontend.shard_map`.
"""

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

__all__ = ["all_gather", "all_to_all", "axis_index", "pmax", "pmin", "ppermute", "psum", "psum_scatter",
           "with_sharding_constraint"]
