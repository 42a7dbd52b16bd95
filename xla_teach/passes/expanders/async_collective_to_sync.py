"""Turn each asynchronous collective pair back into one collective (``convert-async-collectives-to-sync``).

XLA's GPU compiler splits a collective in two -- ``all-gather-start`` launches the transfer,
``all-gather-done`` waits for it -- so that its scheduler can place independent computation in
between and hide the communication. The CPU backend (and xla_teach's GPU backend, so far) runs
collectives synchronously, so a module that arrives with such pairs (a GPU dump, replayed) gets
each ``*-done(*-start(x))`` replaced by the synchronous collective with the start's attributes,
as XLA's ``ConvertAsyncCollectivesToSync`` does. The interpreter runs the pairs as written.

Before::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[4] parameter(0)
      start = f32[4] all-reduce-start(x), replica_groups={}, to_apply=add
      ROOT done = f32[4] all-reduce-done(start)
    }

After::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[4] parameter(0)
      ROOT done = f32[4] all-reduce(x), replica_groups={}, to_apply=add
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.opcodes import ASYNC_COLLECTIVES
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction


class AsyncCollectiveToSync(HloPass):
    name = "convert-async-collectives-to-sync"
    is_optimization = False  # the backends cannot run the pairs: runs at every optimization level

    def run_on_computation(self, comp: HloComputation) -> bool:
        changed = False
        for done in [i for i in comp.instructions if i.opcode.endswith("-done")]:
            start = done.operand(0)
            sync = ASYNC_COLLECTIVES.get(start.opcode)
            if sync is None or start.opcode.removesuffix("-start") != done.opcode.removesuffix("-done"):
                continue
            collective = add_instruction(comp, sync, list(start.operands), dict(start.attrs), shape=done.shape)
            collective.metadata = start.metadata
            name = done.name
            comp.replace_instruction(done, collective).name = name
            self.note(f"{start.name} + {name}: one {sync}")
            changed = True
        return changed
