"""``xla_teach.distributed`` -- ``jax.distributed`` in xla_teach: one process per device over MPI.

    from xla_teach import distributed
    distributed.initialize()        # under mpiexec: this process is device process_index()

The implementation lives with the runtime (:mod:`xla_teach.runtime.distributed`), below the
compile driver that runs a module over the processes; this module is its public name.
"""

from xla_teach.runtime.distributed import (  # noqa: F401
    DistributedError,
    MpiRendezvous,
    initialize,
    is_initialized,
    process_count,
    process_index,
    run_here,
    shutdown,
)

__all__ = ["DistributedError", "MpiRendezvous", "initialize", "is_initialized", "process_count", "process_index",
           "run_here", "shutdown"]
