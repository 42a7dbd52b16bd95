"""Give each loop-state element its own cheap initializer (``clone-cheap-loop-inits``).

A ``while`` updates its state in place, so every element of the state needs a buffer of its own.
When the initial state names one value several times -- a scan's stacked outputs all start as
the same zeros, which CSE has made one ``broadcast`` -- the runtime must first write that value
to memory and then copy it into each element's buffer. For a value that is cheap to make (a
fusion that only broadcasts a constant, or writes an iota), making it once per element costs
less: each copy is written straight into its element's buffer, and the shared value, its memory
and the copies disappear. XLA gets the same by fusing the broadcast into the copies its copy
insertion adds.

Before::

    HloModule m

    zeros {
      zc = f32[] constant(0)
      ROOT zb = f32[4,8] broadcast(zc), dimensions={}
    }

    cond {
      cs = (s32[], f32[4,8], f32[4,8]) parameter(0)
      ci = s32[] get-tuple-element(cs), index=0
      n = s32[] constant(3)
      ROOT lt = pred[] compare(ci, n), direction=LT
    }

    body {
      s = (s32[], f32[4,8], f32[4,8]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      one = s32[] constant(1)
      j = s32[] add(i, one)
      a = f32[4,8] get-tuple-element(s), index=1
      b = f32[4,8] get-tuple-element(s), index=2
      x = f32[] convert(j)
      xs = f32[4,8] broadcast(x), dimensions={}
      a2 = f32[4,8] add(a, xs)
      b2 = f32[4,8] multiply(b, xs)
      ROOT t = (s32[], f32[4,8], f32[4,8]) tuple(j, a2, b2)
    }

    ENTRY main {
      i0 = s32[] constant(0)
      z = f32[4,8] fusion(), kind=kLoop, calls=zeros
      init = (s32[], f32[4,8], f32[4,8]) tuple(i0, z, z)
      ROOT w = (s32[], f32[4,8], f32[4,8]) while(init), condition=cond, body=body
    }

After (``z.1`` is a copy of ``z`` with a fused computation of its own, ``zeros.1``)::

    HloModule m

    zeros {
      zc = f32[] constant(0)
      ROOT zb = f32[4,8] broadcast(zc), dimensions={}
    }

    cond {
      cs = (s32[], f32[4,8], f32[4,8]) parameter(0)
      ci = s32[] get-tuple-element(cs), index=0
      n = s32[] constant(3)
      ROOT lt = pred[] compare(ci, n), direction=LT
    }

    body {
      s = (s32[], f32[4,8], f32[4,8]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      one = s32[] constant(1)
      j = s32[] add(i, one)
      a = f32[4,8] get-tuple-element(s), index=1
      b = f32[4,8] get-tuple-element(s), index=2
      x = f32[] convert(j)
      xs = f32[4,8] broadcast(x), dimensions={}
      a2 = f32[4,8] add(a, xs)
      b2 = f32[4,8] multiply(b, xs)
      ROOT t = (s32[], f32[4,8], f32[4,8]) tuple(j, a2, b2)
    }

    zeros.1 {
      zc.1 = f32[] constant(0)
      ROOT zb.1 = f32[4,8] broadcast(zc.1), dimensions={}
    }

    ENTRY main {
      i0 = s32[] constant(0)
      z = f32[4,8] fusion(), kind=kLoop, calls=zeros
      z.1 = f32[4,8] fusion(), kind=kLoop, calls=zeros.1
      init = (s32[], f32[4,8], f32[4,8]) tuple(i0, z, z.1)
      ROOT w = (s32[], f32[4,8], f32[4,8]) while(init), condition=cond, body=body
    }

Runs after fusion (which would merge the copies back) and before scheduling.
"""

from __future__ import annotations

from xla_teach.hlo.cloning import clone_computation_into
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.fusion.fusion_rules import is_cheap_fusion
from xla_teach.passes.pass_base import HloPass


class CloneCheapLoopInits(HloPass):
    name = "clone-cheap-loop-inits"
    is_optimization = True

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in list(module.computations):
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                init = loop.operand(0)
                if init.opcode != "tuple" or len(init.users) != 1:
                    continue
                seen: set[int] = set()
                for index, value in enumerate(init.operands):
                    shared = value.unique_id in seen or len(value.users) > 1
                    seen.add(value.unique_id)
                    if not shared or value.opcode != "fusion" or not is_cheap_fusion(value):
                        continue
                    copy = self._clone(module, comp, value)
                    init.replace_operand_with(index, copy)
                    self.note(f"{loop.name}: state element {index} starts from {copy.name}, its own copy of "
                              f"{value.name} (no shared buffer to copy from)")
                    changed = True
        return changed

    @staticmethod
    def _clone(module: HloModule, comp: HloComputation, fusion: HloInstruction) -> HloInstruction:
        source = fusion.fused_computation
        fused = HloComputation(source.name)
        clone_computation_into(source, fused, {})
        module.add_computation(fused)  # (which gives it and its instructions fresh names)
        copy = fusion.clone_with_new_operands(fusion.shape, list(fusion.operands))
        copy.attrs["calls"] = fused
        added = comp.add_instruction(copy, fusion.name)
        index = comp.instructions.index(added)  # keep it beside the original in the list
        comp.instructions.pop(index)
        comp.instructions.insert(comp.instructions.index(fusion) + 1, added)
        return added
