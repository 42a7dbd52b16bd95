"""Turn a ``conditional`` inside a reducer, comparator or mapped function into ``select``s
(``conditional-to-select``, XLA's ``ConditionalToSelect``).

A ``reduce``'s ``to_apply`` (likewise ``map``, ``sort``, ``scatter``, ``reduce-window``,
``select-and-scatter``, ``all-reduce``) runs once per element, *inside* the loop of the
kernel that computes the reduction: code generators emit it inline as scalar code, where there
is no place for a ``conditional``'s thunk.  Such a conditional is legal HLO, though, so this
pass rewrites it: every branch is computed (as a ``call`` of the branch, which
``call-inliner`` then inlines) and ``select`` keeps the one the predicate picks.  Computing
both branches is only correct when they are pure and always finish, so conditionals whose
branches have side effects (``rng``, custom calls...) or contain a ``while`` are left alone
(the backend then reports that it cannot emit them).

A branch-index conditional becomes a chain of selects, ``index == 0 ? b0 : (index == 1 ? b1
: ... b(n-1))``: an index out of range picks the last branch, as XLA defines.  Tuple results
are selected element by element.  Conditionals outside such computations (in ENTRY, in a
``while`` body) keep their real control flow.

Before (``max`` written with a conditional)::

    keep {
      ROOT v = f32[] parameter(0)
    }

    bigger {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      gt = pred[] compare(a, b), direction=GT
      ROOT c = f32[] conditional(gt, a, b), true_computation=keep, false_computation=keep
    }

    ENTRY main {
      x = f32[8,16] parameter(0)
      init = f32[] constant(-inf)
      ROOT r = f32[8] reduce(x, init), dimensions={1}, to_apply=bigger
    }

After (``call-inliner`` then replaces each ``call`` by the branch's instructions)::

    keep {
      ROOT v = f32[] parameter(0)
    }

    bigger {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      gt = pred[] compare(a, b), direction=GT
      call = f32[] call(a), to_apply=keep
      call.1 = f32[] call(b), to_apply=keep
      ROOT c = f32[] select(gt, call, call.1)
    }

    ENTRY main {
      x = f32[8,16] parameter(0)
      init = f32[] constant(-inf)
      ROOT r = f32[8] reduce(x, init), dimensions={1}, to_apply=bigger
    }
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, add_instruction, broadcast_scalar, has_side_effect_recursive

# Opcodes whose called computations run per element, inside another op's kernel.
EMBEDDING_OPCODES = frozenset({"map", "reduce", "reduce-window", "scatter", "select-and-scatter", "sort",
                               "all-reduce", "reduce-scatter"})


def embedded_computations(module: HloModule) -> list[HloComputation]:
    """Computations that run inside another op's kernel, and everything they call."""
    found: dict[int, HloComputation] = {}
    stack = [c for comp in module.computations for i in comp.instructions if i.opcode in EMBEDDING_OPCODES
             for c in i.called_computations()]
    while stack:
        comp = stack.pop()
        if id(comp) not in found:
            found[id(comp)] = comp
            stack.extend(c for i in comp.instructions for c in i.called_computations())
    return [c for c in module.computations if id(c) in found]


def _contains_while(comp: HloComputation, seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    if id(comp) in seen:
        return False
    seen.add(id(comp))
    return any(i.opcode == "while" or any(_contains_while(c, seen) for c in i.called_computations())
               for i in comp.instructions)


def _select(comp: HloComputation, pred: HloInstruction, on_true: HloInstruction,
            on_false: HloInstruction) -> HloInstruction:
    """``select`` of two values of the same shape, element by element through tuples."""
    shape = on_true.shape
    if shape.is_tuple:
        parts = []
        for index in range(len(shape.tuple_shapes)):
            pick_true = add_instruction(comp, "get-tuple-element", [on_true], {"index": index})
            pick_false = add_instruction(comp, "get-tuple-element", [on_false], {"index": index})
            parts.append(_select(comp, pred, pick_true, pick_false))
        return add_instruction(comp, "tuple", parts)
    return add_instruction(comp, "select", [broadcast_scalar(comp, pred, shape.dimensions), on_true, on_false])


class ConditionalToSelect(HloPass):
    name = "conditional-to-select"
    is_optimization = False  # code generation needs it: no conditionals inside scalar code

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in embedded_computations(module):
            for instr in list(comp.instructions):
                if instr.opcode != "conditional" or instr.parent is not comp:
                    continue
                branches = instr.branch_computations()
                if has_side_effect_recursive(instr) or any(_contains_while(b) for b in branches):
                    self.note(f"{comp.name}/{instr.name}: kept (a branch has side effects or a loop)")
                    continue
                self._rewrite(comp, instr, branches)
                changed = True
        return changed

    def _rewrite(self, comp: HloComputation, cond: HloInstruction, branches: list[HloComputation]) -> None:
        selector = cond.operand(0)
        results = [add_instruction(comp, "call", [cond.operand(k + 1)], {"to_apply": branch}, shape=cond.shape)
                   for k, branch in enumerate(branches)]
        if selector.shape.element_type == PrimitiveType.PRED:
            value = _select(comp, selector, results[0], results[1])
        else:  # branch index: the last branch unless the index names an earlier one
            value = results[-1]
            for k in reversed(range(len(branches) - 1)):
                k_const = add_constant(comp, k, selector.shape.element_type)
                is_k = add_instruction(comp, "compare", [selector, k_const], {"direction": "EQ"},
                                       shape=Shape.scalar(PrimitiveType.PRED))
                value = _select(comp, is_k, results[k], value)
        self.note(f"{comp.name}/{cond.name}: {len(branches)} branches computed, select keeps one")
        name = cond.name
        comp.replace_instruction(cond, value).name = name
