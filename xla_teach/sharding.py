"""``xla_teach.sharding`` -- meshes and shardings with JAX's names (``jax.sharding``).

    from xla_teach.sharding import Mesh, NamedSharding, PartitionSpec as P

See :mod:`xla_teach.frontend.sharding` and "Programs for several devices" in the docs.
"""

from xla_teach.frontend.sharding import (  # noqa: F401
    Device,
    GSPMDSharding,
    Mesh,
    NamedSharding,
    P,
    PartitionSpec,
    device_count,
    devices,
    make_mesh,
    with_sharding_constraint,
)

__all__ = ["Device", "GSPMDSharding", "Mesh", "NamedSharding", "P", "PartitionSpec", "device_count", "devices",
           "make_mesh", "with_sharding_constraint"]
