"""``xla_teach.multihost_utils`` -- JAX's ``jax.experimental.multihost_utils`` in xla_teach.

    from xla_teach.multihost_utils import process_allgather
    whole = process_allgather(x)    # every process gets all of x, split over the processes

See :mod:`xla_teach.frontend.sharded_array` and "Running on a cluster" in the docs.
"""

from xla_teach.frontend.sharded_array import process_allgather  # noqa: F401

__all__ = ["process_allgather"]
