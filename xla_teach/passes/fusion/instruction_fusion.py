"""Instruction fusion (``fusion``): merge producers into their consumers.

Every HLO instruction is a kernel that reads its operands from memory and
writes its result back. Fusion puts a producer and its consumer into one
``fusion`` instruction so the intermediate value stays in registers. For the
seed example ``reduce_sum(x + y*z)`` three kernels (multiply, add, reduce)
become one, reading x, y, z once and writing a single float.

Before (three kernels: ``multiply``, ``add``, ``reduce``)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[1024] parameter(0)
      y = f32[1024] parameter(1)
      z = f32[1024] parameter(2)
      mul = f32[1024] multiply(y, z)
      sum = f32[1024] add(x, mul)
      zero = f32[] constant(0)
      ROOT r = f32[] reduce(sum, zero), dimensions={0}, to_apply=add
    }

After (one ``kInput`` fusion: the reduction is its root, the "hero", and its producers are
copied into the fused computation, renamed; the parameters stay outside as the fusion's operands)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    fused_computation {
      param_2 = f32[1024] parameter(0)
      param_3.1 = f32[1024] parameter(1)
      param_4 = f32[1024] parameter(2)
      mul.1 = f32[1024] multiply(param_3.1, param_4)
      sum.1 = f32[1024] add(param_2, mul.1)
      zero.1 = f32[] constant(0)
      ROOT r.1 = f32[] reduce(sum.1, zero.1), dimensions={0}, to_apply=add
    }

    ENTRY main {
      x = f32[1024] parameter(0)
      y = f32[1024] parameter(1)
      z = f32[1024] parameter(2)
      ROOT add_reduce_fusion = f32[] fusion(x, y, z), kind=kInput, calls=fused_computation
    }

The fusion kinds are XLA's: ``kLoop`` (a loop over the output of elementwise
ops, broadcasts, reshapes, transposes, slices, pads, concatenates, iota),
``kInput`` (a reduction "hero" at the root with its elementwise producers) and
``kOutput`` (a ``dot`` with an elementwise epilogue such as bias + relu).

The algorithm is XLA's ``InstructionFusion``: visit consumers in reverse
post-order (users first) and try their operands, latest-defined first. A
producer is fused when :func:`xla_teach.passes.fusion.fusion_rules.fusion_decision`
says so; every refusal is noted with its reason in the stage record.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES
from xla_teach.passes.fusion.fusion_rules import FusionConfig, choose_kind, fusion_decision
from xla_teach.passes.fusion.fusion_utils import create_fusion, fuse_producer
from xla_teach.passes.pass_base import HloPass, hlo_lines

STEP_LINES = 12  # of a fusion's body in a recorded step

_CONTROL_CALLERS = CONTROL_FLOW_OPCODES


def fusible_computations(module: HloModule) -> list[HloComputation]:
    """Computations that run as sequences of kernels: the entry and what control flow calls.

    Scalar computations applied per element (reducers, comparators) are not fused.
    """
    result: list[HloComputation] = []
    seen: set[int] = set()
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        result.append(comp)
        for instr in comp.instructions:
            if instr.opcode in _CONTROL_CALLERS:
                stack.extend(instr.called_computations())
    return result


class InstructionFusion(HloPass):
    name = "fusion"

    def __init__(self, config: FusionConfig | None = None) -> None:
        super().__init__()
        self.config = config or FusionConfig()

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            changed |= self._fuse_computation(comp)
        return changed

    def _fuse_computation(self, comp: HloComputation) -> bool:
        changed = False
        refused: set[tuple[int, int]] = set()
        order = comp.post_order()
        # Positions in the post-order, taken once: fusing moves no instruction before another,
        # and a new fusion takes its consumer's place (recomputing them after every fused
        # producer made fusing n instructions cost n^2).
        position = {id(i): n for n, i in enumerate(order)}
        for consumer in reversed(order):
            if consumer.parent is not comp:
                continue  # already fused away
            while True:
                fused_one = False
                # Latest-defined first; constants last so the fusion is named after real work.
                candidates = sorted(set(consumer.operands),
                                    key=lambda op: (op.opcode == "constant", -position.get(id(op), -1)))
                for producer in candidates:
                    reason = self.decide(producer, consumer)
                    if reason is not None:
                        key = (producer.unique_id, consumer.unique_id)
                        if key not in refused:
                            refused.add(key)
                            self.note(f"not fusing {producer.name} into {consumer.name}: {reason}")
                        continue
                    fusion = self._fuse(producer, consumer)
                    position[id(fusion)] = position[id(consumer)]
                    consumer = fusion
                    fused_one = changed = True
                    break
                if not fused_one:
                    break
        return changed

    def decide(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        """None to fuse, else the reason not to (a subclass may decide differently: the exercises do)."""
        return fusion_decision(producer, consumer, self.config)

    def _fuse(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        kind = choose_kind(producer, consumer)
        before = hlo_lines([producer, consumer]) if self.recording_steps else []
        names = [producer.name, consumer.name]
        if consumer.opcode != "fusion":
            name = f"{producer.opcode}_{consumer.opcode}_fusion"
            if producer.opcode == "fusion":
                name = f"{producer.name.split('_fusion')[0].split('.')[0]}_{consumer.opcode}_fusion"
            consumer = create_fusion(consumer, kind, name)
        else:
            consumer.attrs["kind"] = kind
        self.note(f"fused {producer.name} into {consumer.name} ({kind})")
        fuse_producer(consumer, producer)
        if self.recording_steps:  # the fusion and its computation as they are now
            body = consumer.fused_computation.instructions[-STEP_LINES:]  # the root and what fused last
            after = hlo_lines([consumer]) + ["  " + line for line in hlo_lines(body)]
            self.record_step(f"fuse {producer.opcode} into {kind}", fusion_decision, before, after,
                             names + [consumer.name])
        return consumer
