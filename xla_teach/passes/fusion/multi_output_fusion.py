"""Multi-output fusion (``multi_output_fusion``): one kernel, several results.

Instruction fusion refuses to *duplicate* an expensive producer that has
several users, so in softmax the ``exp(x - max)`` stays a separate kernel whose
result is written to memory, read back by the sum, and read again by the
divide. Multi-output fusion recovers most of that traffic in two ways:

* **producer-consumer**: fuse the producer into the consumer *and* keep its
  value as an extra output of the fusion (its other users read it from there).
  The sum-reduction kernel then computes ``exp(x - m)`` itself and stores it on
  the way, instead of reading it from memory;
* **sibling**: two fusions that read the same operand and have the same loop
  shape become one kernel with a tuple root, so the shared operand is read once.
  An elementwise op that instruction fusion left on its own (``exp(x)`` of a
  parameter ``x``) counts as a one-instruction loop fusion here.

Before (what instruction fusion left: ``e`` has two users, so it was not duplicated
into the reduction)::

    add {
      lhs = f32[] parameter(0)
      rhs = f32[] parameter(1)
      ROOT sum = f32[] add(lhs, rhs)
    }

    fused_exp {
      param_0 = f32[8] parameter(0)
      param_1 = f32[8] parameter(1)
      diff = f32[8] subtract(param_0, param_1)
      ROOT exp = f32[8] exponential(diff)
    }

    fused_sum {
      param_0.1 = f32[8] parameter(0)
      zero = f32[] constant(0)
      ROOT total = f32[] reduce(param_0.1, zero), dimensions={0}, to_apply=add
    }

    ENTRY main {
      x = f32[8] parameter(0)
      m = f32[8] parameter(1)
      e = f32[8] fusion(x, m), kind=kLoop, calls=fused_exp
      s = f32[] fusion(e), kind=kInput, calls=fused_sum
      ROOT t = (f32[], f32[8]) tuple(s, e)
    }

After (one kernel with two outputs; ``fused_exp`` is now unused, and the ``dce`` that
follows in the fusion pipeline removes it)::

    add {
      lhs = f32[] parameter(0)
      rhs = f32[] parameter(1)
      ROOT sum = f32[] add(lhs, rhs)
    }

    fused_exp {
      param_0 = f32[8] parameter(0)
      param_1 = f32[8] parameter(1)
      diff = f32[8] subtract(param_0, param_1)
      ROOT exp = f32[8] exponential(diff)
    }

    fused_sum {
      param_1.1 = f32[8] parameter(0)
      param_2 = f32[8] parameter(1)
      diff.1 = f32[8] subtract(param_1.1, param_2)
      exp.1 = f32[8] exponential(diff.1)
      zero = f32[] constant(0)
      total = f32[] reduce(exp.1, zero), dimensions={0}, to_apply=add
      ROOT tuple = (f32[], f32[8]) tuple(total, exp.1)
    }

    ENTRY main {
      x = f32[8] parameter(0)
      m = f32[8] parameter(1)
      s = (f32[], f32[8]) fusion(x, m), kind=kInput, calls=fused_sum
      get-tuple-element = f32[] get-tuple-element(s), index=0
      get-tuple-element.1 = f32[8] get-tuple-element(s), index=1
      ROOT t = (f32[], f32[8]) tuple(get-tuple-element, get-tuple-element.1)
    }

Fusions are only combined when no other path connects them (that would make a
cycle), when the result stays within the size limits, and when the kernel
emitters can run them as one loop (same output dims for loops; side outputs of
a reduction must have the reduction's input shape).
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.passes.fusion.fusion_rules import FusionConfig, holds_reduction, is_elementwise, keeps_minor_dimensions
from xla_teach.passes.fusion.fusion_utils import add_fusion_output, create_fusion, merge_sibling_fusions
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.pass_base import HloPass


def _reduce_hero(fusion: HloInstruction) -> HloInstruction | None:
    root = fusion.fused_computation.root
    return root if root.opcode == "reduce" and root.operand_count == 2 else None


def _reaches(start: HloInstruction, target: HloInstruction, exclude: HloInstruction | None = None) -> bool:
    """Is ``target`` reachable from ``start`` by following users (not via ``exclude``)?"""
    stack, seen = [start], set()
    while stack:
        node = stack.pop()
        if node is target:
            return True
        if node.unique_id in seen or node is exclude:
            continue
        seen.add(node.unique_id)
        stack.extend(node.users)
    return False


def _is_column_reduction(reduce: HloInstruction) -> bool:
    """A reduce whose kept dimensions are the minor-most in its input's layout."""
    shape = reduce.operand(0).shape
    return keeps_minor_dimensions(shape, [d for d in range(shape.rank) if d not in reduce.attr("dimensions")])


def _is_unfused_elementwise(instr: HloInstruction) -> bool:
    """An elementwise op that instruction fusion left alone (its operands are parameters, say):
    a loop of its own, so it can join a sibling like a one-instruction ``kLoop`` fusion."""
    return (instr.opcode != "fusion" and is_elementwise(instr.opcode) and instr.shape.is_array
            and instr.opcode != "rng" and instr.operand_count > 0)


def _is_loop_like(instr: HloInstruction) -> bool:
    return (instr.opcode == "fusion" and instr.fusion_kind == "kLoop" and not instr.shape.is_tuple
            and not holds_reduction(instr))


def _size(instr: HloInstruction) -> int:
    return len(instr.fused_computation.instructions) if instr.opcode == "fusion" else 1 + instr.operand_count


def _kind(instr: HloInstruction) -> str:
    return instr.fusion_kind if instr.opcode == "fusion" else f"unfused {instr.opcode}"


class MultiOutputFusion(HloPass):
    name = "multi_output_fusion"

    def __init__(self, config: FusionConfig | None = None) -> None:
        super().__init__()
        self.config = config or FusionConfig()

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            changed |= self._producer_consumer(comp)
            changed |= self._siblings(comp)
        return changed

    # ---- producer-consumer ------------------------------------------------------------
    def _producer_consumer(self, comp: HloComputation) -> bool:
        changed = False
        for consumer in list(comp.instructions):
            if consumer.parent is not comp or consumer.opcode != "fusion" or consumer.shape.is_tuple:
                continue
            hero = _reduce_hero(consumer)
            for producer in list(dict.fromkeys(consumer.operands)):
                reason = self._producer_consumer_problem(producer, consumer, hero)
                if reason:
                    if producer.opcode == "fusion":
                        self.note(f"not fusing {producer.name} into {consumer.name} as an extra output: {reason}")
                    continue
                self.note(f"fused {producer.name} into {consumer.name}, keeping it as an extra output")
                add_fusion_output(consumer, producer)
                changed = True
                break
        return changed

    def _producer_consumer_problem(self, producer: HloInstruction, consumer: HloInstruction,
                                   hero: HloInstruction | None) -> str | None:
        if not _is_loop_like(producer):
            return "only single-output loop fusions become extra outputs"
        others = [u for u in producer.users if u is not consumer]
        if not others:
            return "it has no other users (plain fusion handles it)"
        if hero is not None:
            param_ids = [p.unique_id for p in consumer.fused_computation.parameter_instructions
                         if consumer.operand(p.parameter_number) is producer]
            if not param_ids or any(u is not hero for p in consumer.fused_computation.parameter_instructions
                                    if p.unique_id in param_ids for u in p.users):
                return "the reduction does not read it directly as its input"
            if producer.shape.dimensions != hero.operand(0).shape.dimensions:
                return "its shape differs from the reduction's input"
            if not self.config.column_reduction_side_outputs and _is_column_reduction(hero):
                return ("the reduction keeps the minor-most dimensions (a column reduction), whose kernel on this "
                        "backend writes no extra outputs")
        elif consumer.fusion_kind != "kLoop" or consumer.shape.dimensions != producer.shape.dimensions:
            return "the consumer's loop has another shape"
        for user in others:
            if _reaches(user, consumer):
                return f"{user.name} leads to the consumer (a cycle would form)"
        size = len(consumer.fused_computation.instructions) + len(producer.fused_computation.instructions)
        if size > self.config.max_instructions:
            return f"the fusion would hold {size} instructions"
        return None

    # ---- siblings ---------------------------------------------------------------------
    def _siblings(self, comp: HloComputation) -> bool:
        """Merge pairs of siblings, sweeping over every operand until a sweep merges nothing.
        A pair refused once stays refused: a merge only adds paths, outputs and operands, so
        what made two instructions unfit together (a path between them, a limit, a shape) is
        still there while both exist -- it is not checked (nor noted) again. (Without that, a
        sweep restarted after every merge re-checked every pair: minutes on a 16-block GPT.)"""
        changed = False
        refused: set[tuple[int, int]] = set()
        merged = True
        while merged:
            merged = False
            for operand in list(comp.instructions):
                while operand.parent is comp and self._merge_one_pair(operand, refused):
                    merged = changed = True
        return changed

    def _merge_one_pair(self, operand: HloInstruction, refused: set[tuple[int, int]]) -> bool:
        """Merge the first pair of ``operand``'s users that may share a loop; False if none."""
        users = [u for u in dict.fromkeys(operand.users)
                 if (u.opcode == "fusion" and not u.shape.is_tuple) or _is_unfused_elementwise(u)]
        for i, a in enumerate(users):
            for b in users[i + 1:]:
                if (a.unique_id, b.unique_id) in refused:
                    continue
                reason = self._sibling_problem(a, b)
                if reason:
                    refused.add((a.unique_id, b.unique_id))
                    self.note(f"not merging siblings {a.name} and {b.name}: {reason}")
                    continue
                self.note(f"merged siblings {a.name} and {b.name} (both read {operand.name})")
                a, b = (x if x.opcode == "fusion" else create_fusion(x, "kLoop") for x in (a, b))
                merge_sibling_fusions(a, b)
                return True
        return False

    def _sibling_problem(self, a: HloInstruction, b: HloInstruction) -> str | None:
        ra, rb = (_reduce_hero(x) if x.opcode == "fusion" else None for x in (a, b))
        if all(_is_loop_like(x) or _is_unfused_elementwise(x) for x in (a, b)):
            if a.shape.dimensions != b.shape.dimensions:
                return "different loop shapes"
        elif ra is not None and rb is not None:
            if ra.operand(0).shape.dimensions != rb.operand(0).shape.dimensions or set(ra.dimensions) != set(
                    rb.dimensions):
                return "reductions over different shapes or dimensions"
        else:
            return f"kinds {_kind(a)} and {_kind(b)} do not share a loop"
        if _reaches(a, b) or _reaches(b, a):
            return "one depends on the other"
        operands = {id(o) for o in a.operands} | {id(o) for o in b.operands}
        if len(operands) > self.config.max_operands:
            return f"{len(operands)} operands exceed the limit"
        size = _size(a) + _size(b)
        if size > self.config.max_instructions:
            return f"the fusion would hold {size} instructions"
        return None
