"""Make a sort stable by breaking ties with positions (``stable-sort-expander``).

A GPU sorts with a bitonic network, which is not stable: keys that compare equal may come out
in any order, so the values sorted along with them would differ from the interpreter's (and the
CPU's) stable merge sort. As XLA's ``StableSortExpander`` does, this pass adds the positions
along the sort dimension as one more operand -- an ``iota``, or an ``iota`` operand the sort
already has (``topk-decomposer`` makes one) -- and a comparator that consults them only when the
original comparator says neither element goes first::

    before(a, b) = less(a, b) or (not less(b, a) and index(a) < index(b))

The order is then total, so *any* correct sorting network gives the stable order.

Before::

    HloModule m

    less {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      c = s32[] parameter(2)
      d = s32[] parameter(3)
      ROOT lt = pred[] compare(a, b), direction=LT
    }

    ENTRY main {
      k = f32[8] parameter(0)
      v = s32[8] parameter(1)
      ROOT s = (f32[8], s32[8]) sort(k, v), dimensions={0}, is_stable=true, to_apply=less
    }

After::

    less.stable {
      c.1 = s32[] parameter(2)
      d.1 = s32[] parameter(3)
      a.1 = f32[] parameter(0)
      b.1 = f32[] parameter(1)
      lt.1 = pred[] compare(a.1, b.1), direction=LT
      lt.swapped = pred[] compare(b.1, a.1), direction=LT
      not.swapped = pred[] not(lt.swapped)
      index.a = s32[] parameter(4)
      index.b = s32[] parameter(5)
      index.lt = pred[] compare(index.a, index.b), direction=LT
      tie.earlier = pred[] and(not.swapped, index.lt)
      ROOT before = pred[] or(lt.1, tie.earlier)
    }

    ENTRY main {
      k = f32[8] parameter(0)
      v = s32[8] parameter(1)
      iota = s32[8] iota(), iota_dimension=0
      sort = (f32[8], s32[8], s32[8]) sort(k, v, iota), dimensions={0}, is_stable=true, to_apply=less.stable
      get-tuple-element = f32[8] get-tuple-element(sort), index=0
      get-tuple-element.1 = s32[8] get-tuple-element(sort), index=1
      ROOT s = (f32[8], s32[8]) tuple(get-tuple-element, get-tuple-element.1)
    }

The GPU pipeline runs it on every sort whose ties could be told apart (all but a single
integer operand compared directly): XLA needs it only for ``is_stable=true``, but a sort that
gives the interpreter's answer on every input is easier to test and to explain.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_instruction


def ties_are_indistinguishable(sort: HloInstruction) -> bool:
    """One integer operand compared directly (``compare(p0, p1)``): equal keys are equal values."""
    if sort.operand_count != 1 or not sort.operand(0).shape.element_type.is_integral:
        return False
    root = sort.to_apply.root
    params = sort.to_apply.parameter_instructions
    return root.opcode == "compare" and set(root.operands) == set(params)


def breaks_ties_by_index(sort: HloInstruction) -> bool:
    """Is the comparator already ``... or (... and index.a < index.b)`` over an iota operand (this
    pass's own form)? Then the order is total and running the pass again changes nothing."""
    root = sort.to_apply.root
    if root.opcode != "or" or root.operand(1).opcode != "and":
        return False
    earlier = root.operand(1).operand(1)
    if earlier.opcode != "compare" or earlier.attr("direction") != "LT":
        return False
    a, b = earlier.operands
    if a.opcode != "parameter" or b.opcode != "parameter" or b.parameter_number != a.parameter_number + 1:
        return False
    operand = sort.operand(a.parameter_number // 2)
    return a.parameter_number % 2 == 0 and operand.opcode == "iota" and \
        operand.attr("iota_dimension") == sort.dimensions[0]


class StableSortExpander(HloPass):
    name = "stable-sort-expander"
    is_optimization = False  # the GPU's sort kernel relies on it for the interpreter's order

    def __init__(self, all_sorts: bool = True) -> None:
        super().__init__()
        self.all_sorts = all_sorts  # False: only is_stable=true, as XLA

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                if instr.opcode != "sort" or ties_are_indistinguishable(instr) or breaks_ties_by_index(instr):
                    continue
                if not self.all_sorts and not instr.attr("is_stable"):
                    continue
                self._expand(module, instr)
                changed = True
        return changed

    def _expand(self, module: HloModule, sort: HloInstruction) -> None:
        comp = sort.parent
        assert comp is not None
        dim = sort.dimensions[0]
        shape = sort.operand(0).shape
        operands = list(sort.operands)
        existing = [i for i, op in enumerate(operands) if op.opcode == "iota" and op.attr("iota_dimension") == dim
                    and op.shape.element_type in (PrimitiveType.S32, PrimitiveType.S64)]
        if existing:
            index_operand = existing[0]
        else:
            etype = PrimitiveType.S32 if shape.dimensions[dim] < 2**31 else PrimitiveType.S64
            iota = add_instruction(comp, "iota", [], {"iota_dimension": dim},
                                   shape=Shape.array(etype, shape.dimensions))
            iota.metadata = sort.metadata
            operands.append(iota)
            index_operand = len(operands) - 1
        comparator = _stable_comparator(module, sort.to_apply, len(operands), index_operand)
        attrs = dict(sort.attrs)
        attrs["to_apply"] = comparator
        attrs["is_stable"] = True
        new_sort = add_instruction(comp, "sort", operands, attrs)
        new_sort.metadata = sort.metadata
        self.note(f"{sort.name}: ties broken by {'its' if existing else 'a new'} iota operand "
                  f"{operands[index_operand].name} ({comparator.name})")
        name, old_comparator = sort.name, sort.to_apply
        if len(operands) == sort.operand_count:  # reused an iota: same results
            comp.replace_instruction(sort, new_sort).name = name
        else:
            parts = [add_instruction(comp, "get-tuple-element", [new_sort], {"index": i})
                     for i in range(sort.operand_count)]
            result = parts[0] if not sort.shape.is_tuple else add_instruction(comp, "tuple", parts)
            comp.replace_instruction(sort, result).name = name
        if not any(old_comparator in i.called_computations() for c in module.computations for i in c.instructions):
            module.remove_computation(old_comparator)


def _stable_comparator(module: HloModule, old: HloComputation, operands: int, index_operand: int) -> HloComputation:
    """``old`` with ties broken by operand ``index_operand``; ``operands`` pairs of parameters."""
    new = HloComputation(f"{old.name}.stable")
    old_params = old.parameter_instructions
    params = []
    for i in range(operands):
        if 2 * i < len(old_params):
            a, b = old_params[2 * i], old_params[2 * i + 1]
            params += [new.add_parameter(a.shape, a.name), new.add_parameter(b.shape, b.name)]
        else:
            index_shape = Shape.scalar(PrimitiveType.S32)
            params += [new.add_parameter(index_shape, "index.a"), new.add_parameter(index_shape, "index.b")]
    swapped = [params[i ^ 1] for i in range(len(old_params))]
    lt = _inline(new, old, params[: len(old_params)], "")
    gt = _inline(new, old, swapped, ".swapped")
    index_a, index_b = params[2 * index_operand], params[2 * index_operand + 1]
    earlier = add_instruction(new, "compare", [index_a, index_b], {"direction": "LT"}, name="index.lt")
    not_gt = add_instruction(new, "not", [gt], name="not.swapped")
    tie = add_instruction(new, "and", [not_gt, earlier], name="tie.earlier")
    new.root_instruction = add_instruction(new, "or", [lt, tie], name="before")
    module.add_computation(new)
    return new


def _inline(into: HloComputation, source: HloComputation, args: list[HloInstruction], suffix: str) -> HloInstruction:
    """Copy ``source``'s instructions into ``into`` with its parameters bound to ``args``."""
    mapped: dict[int, HloInstruction] = {p.unique_id: a for p, a in zip(source.parameter_instructions, args,
                                                                          strict=True)}
    for instr in source.post_order():
        if instr.opcode == "parameter":
            continue
        copy = instr.clone_with_new_operands(instr.shape, [mapped[o.unique_id] for o in instr.operands],
                                             name=f"{instr.name}{suffix}")
        mapped[instr.unique_id] = into.add_instruction(copy, copy.name)
    return mapped[source.root.unique_id]
