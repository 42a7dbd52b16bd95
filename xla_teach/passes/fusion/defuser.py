"""Undoing fusion (``defuser``, XLA's ``Defuser``).

Each ``fusion`` instruction is replaced by a copy of its fused computation's instructions, the
fused parameters wired to the fusion's operands, exactly as ``call-inliner`` inlines a ``call``.
The module computes the same values, one kernel per instruction instead of one per fusion.

The CPU and GPU pipelines run it first, on modules that arrive already fused (XLA's own
optimized HLO): xla_teach's fusion passes then fuse again with the rules its kernels implement.
The compile explorer also uses it to time instructions *inside* a fusion: the defused module runs with
a profiler, and each fused instruction's share of its fusion's measured time is estimated from
its own time when it ran alone (:func:`defuse_module` says which copy stands for which fused
instruction, since a copy's name may take a ``.N`` suffix).

The example is a scatter as a fusion root, as XLA CPU writes ``x.at[ids].add(u)``; the
pipelines' ``defuser`` keeps the fusions xla_teach's kernels can emit and inlines this one.

Before::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }
    wrapped_scatter {
      p0 = f32[4] parameter(0)
      p1 = s32[2,1] parameter(1)
      p2 = f32[2,1] parameter(2)
      ROOT sc = f32[4] scatter(p0, p1, p2), update_window_dims={1}, inserted_window_dims={},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
    }
    ENTRY main {
      x = f32[4] parameter(0)
      ids = s32[2,1] parameter(1)
      u = f32[2,1] parameter(2)
      ROOT f = f32[4] fusion(x, ids, u), kind=kLoop, calls=wrapped_scatter
    }

After::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }
    ENTRY main {
      x = f32[4] parameter(0)
      ids = s32[2,1] parameter(1)
      u = f32[2,1] parameter(2)
      ROOT sc.1 = f32[4] scatter(x, ids, u), update_window_dims={1}, inserted_window_dims={},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
    }
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.simplifiers.dce import remove_unreachable_computations


def defuse(fusion: HloInstruction) -> dict[str, str]:
    """Replace ``fusion`` by copies of its fused instructions, placed where the fusion was (so
    the computation's order, and the order of random draws, stays the same); returns fused
    name -> copy's name."""
    comp = fusion.parent
    assert comp is not None and fusion.opcode == "fusion"
    copies: dict[int, HloInstruction] = {}
    names: dict[str, str] = {}
    position = comp.instructions.index(fusion)
    for instr in fusion.fused_computation.post_order():
        if instr.opcode == "parameter":
            copies[instr.unique_id] = fusion.operand(instr.parameter_number)
            continue
        copy = instr.clone_with_new_operands(instr.shape, [copies[o.unique_id] for o in instr.operands])
        copy.metadata = instr.metadata
        comp.add_instruction(copy, instr.name)
        comp.instructions.remove(copy)
        comp.instructions.insert(position, copy)
        position += 1
        copies[instr.unique_id] = copy
        names[instr.name] = copy.name
    comp.replace_instruction(fusion, copies[fusion.fused_computation.root.unique_id])
    return names


def defuse_module(module: HloModule, keep: Callable[[HloInstruction], bool] | None = None,
                  defused: list[str] | None = None) -> dict[str, str]:
    """Defuse the fusions of ``module`` -- all, or those ``keep`` rejects; returns fused name ->
    copy's name, and lists each defused fusion in ``defused``. A fusion inside a fusion is
    copied out with its caller's other instructions, then considered in the next round."""
    names: dict[str, str] = {}
    while True:
        fused = {id(i.fused_computation) for i in module.instructions() if i.opcode == "fusion"}
        fusions = [i for comp in module.computations if id(comp) not in fused
                   for i in comp.instructions if i.opcode == "fusion" and (keep is None or not keep(i))]
        if not fusions:
            break
        for fusion in fusions:
            if defused is not None:
                defused.append(f"{fusion.parent.name}: {fusion.name} ({fusion.fusion_kind})")  # type: ignore[union-attr]
            names.update(defuse(fusion))
        remove_unreachable_computations(module)
    return names


class Defuser(HloPass):
    """Inlines fusions' computations in place of the fusions (module docstring): every fusion,
    or with ``keep``, those for which ``keep(fusion)`` is false.

    The CPU and GPU pipelines run it first with ``keep`` = "our kernels can emit this fusion":
    a module that arrives fused (XLA's own optimized HLO: a scatter as a fusion root, XLA's
    kCustom fusions...) keeps the fusions the backend can emit as written, and the others are
    defused, for xla_teach's fusion passes to fuse again with the rules its kernels implement."""

    name = "defuser"
    is_optimization = False  # the backends cannot emit every fusion another compiler made

    def __init__(self, keep: Callable[[HloInstruction], bool] | None = None) -> None:
        super().__init__()
        self.keep = keep

    def run(self, module: HloModule) -> bool:
        defused: list[str] = []
        names = defuse_module(module, self.keep, defused)
        for fusion in defused:
            why = "" if self.keep is None else ": not a fusion this backend's kernels emit"
            self.note(f"defused {fusion}{why}")
        return bool(names)
