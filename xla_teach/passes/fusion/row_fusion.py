"""Fuse a whole row-wise computation -- softmax, layer norm, log-softmax -- into one kernel (``row-fusion``).

Instruction fusion stops at reductions: ``softmax(x)`` becomes three kernels (row max, then
``exp`` and the row sum, then the division), and each pass streams the whole array through
memory. But every row is independent and small (a 1024-wide f32 row is 4 KiB and sits in L1), so
one kernel can do all three steps per row: read the row from memory once, reduce it twice from
cache, and write the result once. XLA's GPU compiler does the same for softmax-like patterns
(``SoftmaxRewriterTriton``, a ``kCustom`` fusion); this is the CPU version.

The pass looks, from each candidate root, for a group of instructions over one shape
``[kept..., row...]`` made only of elementwise ops, scalar constants, ``reduce``s over exactly
the row dimensions (the minor-most in memory) and ``broadcast``s of such reductions back over
the rows; every value inside the group must be used only inside it. With at least one reduction
inside, the group becomes one ``kCustom`` fusion.

The pass runs just before instruction fusion, on unfused HLO.

Before (softmax over the rows of ``x``; instruction fusion alone would make three kernels)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT sum = f32[] add(a, b)
    }

    max {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT m = f32[] maximum(a, b)
    }

    ENTRY main {
      x = f32[8,100] parameter(0)
      ninf = f32[] constant(-inf)
      mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max
      mxb = f32[8,100] broadcast(mx), dimensions={0}
      sub = f32[8,100] subtract(x, mxb)
      e = f32[8,100] exponential(sub)
      zero = f32[] constant(0)
      s = f32[8] reduce(e, zero), dimensions={1}, to_apply=add
      sb = f32[8,100] broadcast(s), dimensions={0}
      ROOT d = f32[8,100] divide(e, sb)
    }

After (one ``kCustom`` fusion; the backend config tells the CPU emitter it is a row fusion)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT sum = f32[] add(a, b)
    }

    max {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT m = f32[] maximum(a, b)
    }

    fused_computation {
      param_1.2 = f32[8,100] parameter(0)
      ninf.1 = f32[] constant(-inf)
      mx.1 = f32[8] reduce(param_1.2, ninf.1), dimensions={1}, to_apply=max
      mxb.1 = f32[8,100] broadcast(mx.1), dimensions={0}
      sub.1 = f32[8,100] subtract(param_1.2, mxb.1)
      e.1 = f32[8,100] exponential(sub.1)
      zero.1 = f32[] constant(0)
      s.1 = f32[8] reduce(e.1, zero.1), dimensions={1}, to_apply=add
      sb.1 = f32[8,100] broadcast(s.1), dimensions={0}
      ROOT d.1 = f32[8,100] divide(e.1, sb.1)
    }

    ENTRY main {
      x = f32[8,100] parameter(0)
      ROOT divide_row_fusion = f32[8,100] fusion(x), kind=kCustom, calls=fused_computation,
          backend_config={"fusion_backend_config":{"kind":"__cpu_row_fusion"}}
    }

The CPU emitter (``kernels/row_fusion.py``) runs, per row: each reduction in order (its value
then stands for the whole row), then the root over the row.
"""

from __future__ import annotations

import json

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.fusion.fusion_utils import create_fusion, fuse_producer
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.pass_base import HloPass

ROW_FUSION_CONFIG = json.dumps({"fusion_backend_config": {"kind": "__cpu_row_fusion"}}, separators=(",", ":"))
MAX_ROW_ELEMENTS = 1 << 14  # a row must stay in the L1/L2 cache while it is reread


def is_row_fusion(instr: HloInstruction) -> bool:
    return instr.opcode == "fusion" and instr.backend_config == ROW_FUSION_CONFIG


def _row_dims(shape) -> tuple[int, ...] | None:  # type: ignore[no-untyped-def]
    return None if shape.is_tuple else tuple(shape.dimensions)


class _Group:
    """The candidate instructions around one root: first everything of the right *form*, then
    pruned until no member (except the root) is used outside the group."""

    def __init__(self, root: HloInstruction) -> None:
        self.root = root
        self.dims = tuple(root.shape.dimensions)
        self.members: dict[int, HloInstruction] = {root.unique_id: root}
        self.row: tuple[int, ...] | None = None  # the reduced (row) dimensions

    @property
    def reduces(self) -> int:
        return sum(1 for m in self.members.values() if m.opcode == "reduce")

    def grow(self) -> None:
        stack = [self.root]
        while stack:
            instr = stack.pop()
            for op in instr.operands:
                if op.unique_id not in self.members and self._admit(op):
                    self.members[op.unique_id] = op
                    stack.append(op)
                    if op.opcode == "broadcast" and op.operand(0).opcode == "reduce":
                        stack.append(op.operand(0))  # admitted with it: explore what it reduces
        self._prune()

    def _prune(self) -> None:
        while True:
            outside = [m for m in self.members.values() if m is not self.root and m.opcode != "constant"
                       and any(u.unique_id not in self.members for u in m.users)]
            if not outside:
                break
            for m in outside:
                del self.members[m.unique_id]
            self._drop_unreachable()

    def _drop_unreachable(self) -> None:
        """Members no longer feeding the root (their consumer was pruned) leave too."""
        reached, stack = {self.root.unique_id}, [self.root]
        while stack:
            for op in stack.pop().operands:
                if op.unique_id in self.members and op.unique_id not in reached:
                    reached.add(op.unique_id)
                    stack.append(op)
        self.members = {k: v for k, v in self.members.items() if k in reached}

    def _admit(self, op: HloInstruction) -> bool:
        if op.opcode == "constant":
            return op.shape.rank == 0
        if op.shape.is_tuple:
            return False
        if op.opcode == "broadcast":
            source = op.operand(0)
            return source.shape.rank == 0 or (source.opcode == "reduce"
                                              and self._row_reduce(source, tuple(op.attrs["dimensions"])))
        if op.opcode == "reduce":
            return False  # only through a broadcast back over the rows (see _row_reduce)
        return is_elementwise(op.opcode) and tuple(op.shape.dimensions) == self.dims

    def _row_reduce(self, reduce: HloInstruction, broadcast_dims: tuple[int, ...]) -> bool:
        """``reduce`` reduces rows of a group-shaped value and the broadcast puts it back over them."""
        if reduce.operand_count != 2 or tuple(reduce.operand(0).shape.dimensions) != self.dims:
            return False
        row = tuple(sorted(reduce.attrs["dimensions"]))
        kept = tuple(d for d in range(len(self.dims)) if d not in row)
        layout = reduce.operand(0).shape.minor_to_major()
        if not row or broadcast_dims != kept or set(layout[: len(row)]) != set(row):
            return False
        if (self.row is not None and row != self.row) or reduce.operand(1).opcode != "constant":
            return False
        self.row = row
        self.members[reduce.unique_id] = reduce
        return True


class RowFusion(HloPass):
    name = "row-fusion"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            fused: set[int] = set()
            for root in reversed(comp.post_order()):
                if root.unique_id in fused or not is_elementwise(root.opcode) or root.shape.is_tuple:
                    continue
                group = _Group(root)
                group.grow()
                if not group.reduces or group.row is None or len(group.members) < 3:
                    continue
                row_elements = 1
                for d in group.row:
                    row_elements *= group.dims[d]
                if row_elements > MAX_ROW_ELEMENTS:
                    self.note(f"{root.name}: rows of {row_elements} elements are too long to keep in cache")
                    continue
                fusion = create_fusion(root, "kCustom", name=f"{root.opcode}_row_fusion")
                fusion.backend_config = ROW_FUSION_CONFIG
                fused.update(group.members)
                order = [i for i in reversed(comp.post_order()) if i.unique_id in group.members and i is not root]
                for producer in order:
                    if producer in fusion.operands:
                        fuse_producer(fusion, producer)
                self.note(f"{fusion.name}: {len(group.members)} instructions with {group.reduces} row reductions "
                          f"in one kernel")
                changed = True
        return changed
