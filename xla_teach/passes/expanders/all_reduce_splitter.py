"""Split a variadic ``all-reduce`` into one ``all-reduce`` per operand (``all-reduce-splitter``).

An ``all-reduce`` may take several operands and return a tuple, one result per operand, all
reduced with the same ``to_apply`` over the same replica groups. Each operand is reduced on
its own -- the operands never mix -- so the variadic form is only a way to batch the
communication. The backends emit one array per kernel, so this pass (xla_teach's own; XLA
does the reverse with its ``all-reduce-combiner``, to batch small transfers) gives each
operand its own ``all-reduce`` with the same attributes and gathers the results with a
``tuple``; ``tuple-simplifier`` then lets users read each result directly. On one device
every all-reduce returns its operand, and the elemental emitter fuses it like a ``copy``.

Before::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[2] parameter(1)
      ROOT r = (f32[4], f32[2]) all-reduce(x, y), replica_groups={}, to_apply=add
    }

After::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[4] parameter(0)
      all-reduce = f32[4] all-reduce(x), replica_groups={}, to_apply=add
      y = f32[2] parameter(1)
      all-reduce.1 = f32[2] all-reduce(y), replica_groups={}, to_apply=add
      ROOT r = (f32[4], f32[2]) tuple(all-reduce, all-reduce.1)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction


class AllReduceSplitter(HloPass):
    name = "all-reduce-splitter"
    is_optimization = False  # runs even at optimization level 0, like the other expanders

    def run_on_computation(self, comp: HloComputation) -> bool:
        if comp.parent is not None and comp.parent.device_count() > 1:
            return False  # several devices: collectives run on the host, a variadic one included
        changed = False
        for instr in list(comp.instructions):
            if instr.opcode != "all-reduce" or not instr.shape.is_tuple:
                continue
            parts = [add_instruction(comp, "all-reduce", [operand], dict(instr.attrs), shape=shape)
                     for operand, shape in zip(instr.operands, instr.shape.tuple_shapes, strict=True)]
            for part in parts:
                part.metadata = instr.metadata
            gathered = add_instruction(comp, "tuple", parts, shape=instr.shape)
            self.note(f"{instr.name}: variadic all-reduce of {len(parts)} operands -> {len(parts)} all-reduces")
            name = instr.name
            comp.replace_instruction(instr, gathered).name = name
            changed = True
        return changed
