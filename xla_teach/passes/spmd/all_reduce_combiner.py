"""Combine independent all-reduces into one (``all-reduce-combiner``), and drop degenerate ones.

Every collective costs a meeting of the devices -- a rendezvous of threads, an ``MPI_Allgather``
across processes, a network round trip between hosts -- whatever the bytes it moves. A
data-parallel training step all-reduces every gradient separately; XLA's
``AllReduceCombiner`` makes one all-reduce of several operands out of all-reduces that do not
depend on each other and share their groups and reducer, so the devices meet once. This pass
does that (ENTRY and every other computation, all candidates of a kind at once), and first
replaces a collective whose every group holds one device by its operand (XLA's
``AllReduceSimplifier`` for degenerate groups): there is no one to exchange with. It acts on
modules for several devices (on one, the CPU computes collectives as kernels, one per operand:
``all-reduce-splitter``); the MLP step of ``benchmarks/data_parallel_scaling.py`` goes from
three all-reduces to one.

Before (``num_partitions=2``)::

    HloModule m, num_partitions=2

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[3] parameter(1)
      sx = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add
      sy = f32[3] all-reduce(y), replica_groups={{0,1}}, to_apply=add
      alone = f32[3] all-reduce(y), replica_groups={{0},{1}}, to_apply=add
      ROOT t = (f32[4], f32[3], f32[3]) tuple(sx, sy, alone)
    }

After::

    HloModule m, num_partitions=2

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[3] parameter(1)
      all-reduce = (f32[4], f32[3]) all-reduce(x, y), replica_groups={{0,1}}, to_apply=add
      sx = f32[4] get-tuple-element(all-reduce), index=0
      sy = f32[3] get-tuple-element(all-reduce), index=1
      ROOT t = (f32[4], f32[3], f32[3]) tuple(sx, sy, y)
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.replica_groups import expand_replica_groups
from xla_teach.hlo.shape import Shape
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction

DEGENERATE_CANDIDATES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-broadcast")


def _reducer_key(instr: HloInstruction) -> tuple[str, ...]:
    """What makes two reducers the same: the opcodes and types of their instructions."""
    comp = instr.to_apply
    return tuple(f"{i.opcode}:{i.shape}" for i in comp.post_order())


class AllReduceCombiner(HloPass):
    name = "all-reduce-combiner"

    def run_on_computation(self, comp: HloComputation) -> bool:
        module = comp.parent
        devices = module.device_count() if module is not None else 1
        if devices <= 1:  # one device: the CPU's kernels compute its collectives (one per operand)
            return False
        changed = self._drop_degenerate(comp, devices)
        return self._combine(comp) or changed

    def _drop_degenerate(self, comp: HloComputation, devices: int) -> bool:
        changed = False
        for instr in [i for i in comp.instructions if i.opcode in DEGENERATE_CANDIDATES]:
            groups = expand_replica_groups(str(instr.attrs.get("replica_groups") or "{}"), devices)
            shapes = instr.shape.leaf_shapes() if instr.shape.is_tuple else [instr.shape]
            same = all(s.dimensions == o.shape.dimensions for s, o in zip(shapes, instr.operands, strict=False))
            if all(len(g) == 1 for g in groups) and same and not instr.shape.is_tuple:
                self.note(f"{instr.name}: every group holds one device: its operand")
                comp.replace_instruction(instr, instr.operand(0))
                changed = True
        return changed

    def _combine(self, comp: HloComputation) -> bool:
        candidates = [i for i in comp.post_order() if i.opcode == "all-reduce" and not i.shape.is_tuple]
        by_kind: dict[tuple[str, tuple[str, ...]], list[HloInstruction]] = {}
        for instr in candidates:
            by_kind.setdefault((str(instr.attrs.get("replica_groups")), _reducer_key(instr)), []).append(instr)
        changed = False
        for group in by_kind.values():
            chosen = self._independent(group)
            if len(chosen) < 2:
                continue
            operands = [i.operand(0) for i in chosen]
            combined = add_instruction(comp, "all-reduce", operands, dict(chosen[0].attrs),
                                       shape=Shape.make_tuple([i.shape for i in chosen]))
            for k, instr in enumerate(chosen):
                name = instr.name
                part = add_instruction(comp, "get-tuple-element", [combined], {"index": k}, shape=instr.shape)
                comp.replace_instruction(instr, part).name = name
            self.note(f"{combined.name}: {len(chosen)} all-reduces ({', '.join(i.name for i in operands)}) "
                      "combined: the devices meet once")
            changed = True
        return changed

    @staticmethod
    def _independent(group: list[HloInstruction]) -> list[HloInstruction]:
        """The all-reduces of ``group`` (in dataflow order) none of which feeds another."""
        chosen: list[HloInstruction] = []
        for instr in group:
            ancestors: set[int] = set()
            stack = list(instr.operands)
            while stack:
                node = stack.pop()
                if node.unique_id in ancestors:
                    continue
                ancestors.add(node.unique_id)
                stack.extend(node.operands)
            if not any(c.unique_id in ancestors for c in chosen):
                chosen.append(instr)
        return chosen
