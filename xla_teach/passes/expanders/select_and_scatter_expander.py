"""Rewrite ``select-and-scatter`` as a ``reduce-window`` that picks each window's element and a
``scatter`` of the source onto the picks (``select-and-scatter-expander``, XLA's
``SelectAndScatterExpander``).

``select-and-scatter`` is max-pooling's gradient: for each window of the operand, ``select``
picks one element, and that window's ``source`` value is combined (``scatter``, usually add)
into the output at the picked position; every other position keeps ``init``. Run as written, it
is one loop over the source -- the GPU ran it on a single thread (75 ms of a CNN step's 141 ms
on an H200). Split in two, both parts are parallel kernels:

1. a variadic ``reduce-window`` over (operand, the operand's positions numbered by an ``iota``)
   whose reducer keeps the element ``select`` prefers -- the accumulator is the element kept so
   far, as ``select-and-scatter`` runs it, and a position of -1 means "none yet" (every window
   starts so, and padding is never picked);
2. a ``scatter`` of the source, one update per window, to the picked positions of a flat
   ``broadcast(init)``: updates to the same position combine with ``scatter`` (atomically on the
   GPU); a window that picked nothing (all padding) has position -1, which a scatter skips.

Before::

    ge {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT ge = pred[] compare(a, b), direction=GE
    }
    add {
      c = f32[] parameter(0)
      d = f32[] parameter(1)
      ROOT sum = f32[] add(c, d)
    }
    ENTRY main {
      x = f32[4] parameter(0)
      s = f32[2] parameter(1)
      z = f32[] constant(0)
      ROOT r = f32[4] select-and-scatter(x, s, z), window={size=2 stride=2}, select=ge, scatter=add
    }

After::

    ge {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT ge = pred[] compare(a, b), direction=GE
    }
    add {
      c = f32[] parameter(0)
      d = f32[] parameter(1)
      ROOT sum = f32[] add(c, d)
    }
    select_and_scatter_pick {
      kept_position = s32[] parameter(1)
      none = s32[] constant(-1)
      nothing_kept = pred[] compare(kept_position, none), direction=EQ
      some_kept = pred[] not(nothing_kept)
      candidate_position = s32[] parameter(3)
      no_candidate = pred[] compare(candidate_position, none), direction=EQ
      kept = f32[] parameter(0)
      candidate = f32[] parameter(2)
      ge.1 = pred[] compare(kept, candidate), direction=GE
      prefer_kept = pred[] or(no_candidate, ge.1)
      keep = pred[] and(some_kept, prefer_kept)
      value = f32[] select(keep, kept, candidate)
      position = s32[] select(keep, kept_position, candidate_position)
      ROOT pick = (f32[], s32[]) tuple(value, position)
    }
    ENTRY main {
      z = f32[] constant(0)
      base = f32[4] broadcast(z), dimensions={}
      x = f32[4] parameter(0)
      iota = s32[4] iota(), iota_dimension=0
      none.1 = s32[] constant(-1)
      picks = (f32[2], s32[2]) reduce-window(x, iota, z, none.1), window={size=2 stride=2},
          to_apply=select_and_scatter_pick
      picked = s32[2] get-tuple-element(picks), index=1
      positions = s32[2,1] reshape(picked)
      s = f32[2] parameter(1)
      ROOT r = f32[4] scatter(base, positions, s), update_window_dims={}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
    }
"""

from __future__ import annotations

import math

from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, add_instruction
from xla_teach.passes.simplifiers.call_inliner import inline_call


class SelectAndScatterExpander(HloPass):
    name = "select-and-scatter-expander"
    is_optimization = False  # the GPU needs it: its select-and-scatter kernel is one thread

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in list(module.computations):
            for instr in [i for i in comp.instructions if i.opcode == "select-and-scatter"]:
                self._expand(module, comp, instr)
                changed = True
        return changed

    def _expand(self, module: HloModule, comp: HloComputation, sas: HloInstruction) -> None:
        operand, source, init = sas.operands
        shape = operand.shape
        count = shape.element_count()
        position_type = PrimitiveType.S32 if count < 2**31 else PrimitiveType.S64
        pick = _pick_computation(module, sas.attrs["select"], shape.element_type, position_type)
        flat_positions = add_instruction(comp, "iota", [], {"iota_dimension": 0},
                                         shape=Shape.array(position_type, (count,)))
        positions = flat_positions
        if shape.rank != 1:
            positions = add_instruction(comp, "reshape", [flat_positions], result_dims=list(shape.dimensions))
        none = add_constant(comp, -1, position_type, name="none")
        picks = add_instruction(comp, "reduce-window", [operand, positions, init, none],
                                {"window": sas.attr("window"), "to_apply": pick}, name="picks")
        picked = add_instruction(comp, "get-tuple-element", [picks], {"index": 1}, name="picked")
        updates = source.shape.element_count()
        indices = add_instruction(comp, "reshape", [picked], result_dims=[updates, 1], name="positions")
        flat_source = source
        if source.shape.rank != 1:
            flat_source = add_instruction(comp, "reshape", [source], result_dims=[updates])
        base = add_instruction(comp, "broadcast", [init], {"dimensions": ()}, result_dims=[count], name="base")
        scattered = add_instruction(comp, "scatter", [base, indices, flat_source], {
            "update_window_dims": (), "inserted_window_dims": (0,), "scatter_dims_to_operand_dims": (0,),
            "index_vector_dim": 1, "to_apply": sas.attrs["scatter"]}, name="scattered")
        result = scattered
        if shape.rank != 1:
            result = add_instruction(comp, "reshape", [scattered], result_dims=list(shape.dimensions))
        for new in {flat_positions, positions, none, picks, picked, indices, flat_source, base, scattered, result}:
            if new is not source:
                new.metadata = sas.metadata  # max-pool's gradient keeps JAX's op_name and source line
        self.note(f"{sas.name}: reduce-window picks one of {math.prod(w.size for w in sas.attr('window').dimensions)} "
                  f"positions per window, then a scatter of {updates} source values")
        name = sas.name
        comp.replace_instruction(sas, result).name = name


def _pick_computation(module: HloModule, select: HloComputation, etype: PrimitiveType,
                      position_type: PrimitiveType) -> HloComputation:
    """(kept, kept_position, candidate, candidate_position) -> the one ``select`` keeps, as
    ``select-and-scatter`` decides: a candidate replaces what is kept unless ``select(kept,
    candidate)``; position -1 is "none"."""
    pick = HloComputation("select_and_scatter_pick")
    module.add_computation(pick)
    value, position = Shape.scalar(etype), Shape.scalar(position_type)
    kept = pick.add_parameter(value, "kept")
    kept_position = pick.add_parameter(position, "kept_position")
    candidate = pick.add_parameter(value, "candidate")
    candidate_position = pick.add_parameter(position, "candidate_position")
    none = add_constant(pick, -1, position_type, name="none")
    nothing_kept = add_instruction(pick, "compare", [kept_position, none], {"direction": "EQ"}, name="nothing_kept")
    no_candidate = add_instruction(pick, "compare", [candidate_position, none], {"direction": "EQ"},
                                   name="no_candidate")
    selected = inline_call(add_instruction(pick, "call", [kept, candidate], {"to_apply": select},
                                           shape=Shape.scalar(PrimitiveType.PRED)))
    prefer_kept = add_instruction(pick, "or", [no_candidate, selected], name="prefer_kept")
    some_kept = add_instruction(pick, "not", [nothing_kept], name="some_kept")
    keep = add_instruction(pick, "and", [some_kept, prefer_kept], name="keep")
    chosen = add_instruction(pick, "select", [keep, kept, candidate], name="value")
    chosen_position = add_instruction(pick, "select", [keep, kept_position, candidate_position], name="position")
    pick.root_instruction = add_instruction(pick, "tuple", [chosen, chosen_position], name="pick")
    return pick
