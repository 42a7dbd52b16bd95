"""Fuse a whole row-wise computation -- softmax, layer norm, log-softmax -- into one kernel (``row-fusion``).

Instruction fusion stops at reductions: ``softmax(x)`` becomes three kernels (row max, then
``exp`` and the row sum, then the division), and each pass streams the whole array through
memory. But every row is independent and small (a 1024-wide f32 row is 4 KiB and sits in L1), so
one kernel can do all three steps per row: read the row from memory once, reduce it twice from
cache, and write the result once. XLA's GPU compiler does the same for softmax-like patterns
(``SoftmaxRewriterTriton``, a ``kCustom`` fusion). Both backends run this pass: the CPU walks a
row at a time per thread, the GPU gives each row a thread block (``backend_config`` names which
emitter takes the fusion: ``__cpu_row_fusion`` or ``__gpu_row_fusion``).

The pass looks, from each candidate root, for a group of instructions over one shape
``[kept..., row...]`` made only of elementwise ops, scalar constants, ``reduce``s over exactly
the row dimensions (the minor-most in memory), ``broadcast``s of such reductions back over the
rows (also through elementwise ops on the reduced values: ``mean = sum / n``), and broadcasts of
values from outside (a layer norm's scale and offset); every value inside the group must be used
only inside it. With at least one reduction
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

The emitters (``backends/cpu/kernels/row_fusion.py``, ``backends/gpu/kernels/row_fusion.py``)
run, per row: each reduction in order (its value then stands for the whole row), then the root
over the row.
"""

from __future__ import annotations

import json

from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.passes.fusion.fusion_utils import create_fusion, fuse_producer
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.pass_base import HloPass


def row_fusion_config(backend: str) -> str:
    """The ``backend_config`` that marks a row fusion for ``backend``'s emitter."""
    return json.dumps({"fusion_backend_config": {"kind": f"__{backend}_row_fusion"}}, separators=(",", ":"))


ROW_FUSION_CONFIG = row_fusion_config("cpu")
ROW_FUSION_CONFIGS = (ROW_FUSION_CONFIG, row_fusion_config("gpu"))
MAX_ROW_ELEMENTS = 1 << 14  # a row must stay in the L1/L2 cache while it is reread


def is_row_fusion(instr: HloInstruction) -> bool:
    return instr.opcode == "fusion" and instr.backend_config in ROW_FUSION_CONFIGS


class _Group:
    """The candidate instructions around one root: first everything of the right *form*, then
    pruned until no member (except the root) is used outside the group."""

    def __init__(self, root: HloInstruction) -> None:
        self.root = root
        self.dims = tuple(root.shape.dimensions)
        self.members: dict[int, HloInstruction] = {root.unique_id: root}
        self.row: tuple[int, ...] | None = None  # the reduced (row) dimensions
        self.row_values: dict[int, list[HloInstruction]] = {}  # broadcast -> the per-row values it spreads

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
                    if op.opcode == "broadcast":  # admitted with it: explore what its row values reduce
                        stack += [m for m in self._row_values(op.operand(0)) if m.opcode == "reduce"]
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
            if source.shape.rank == 0:
                return True
            found = self._row_expression(source, tuple(op.attrs["dimensions"]))
            if found is None:
                # Any other broadcast (a layer norm's scale and offset over the rows) is computed
                # in the kernel from its operand, which the fusion reads.
                return tuple(op.shape.dimensions) == self.dims
            row, values = found
            self.row = row
            for value in values:
                self.members[value.unique_id] = value
            self.row_values[op.unique_id] = values
            return True
        if op.opcode == "reduce":
            return False  # only through a broadcast back over the rows (see _row_expression)
        return is_elementwise(op.opcode) and tuple(op.shape.dimensions) == self.dims

    def _row_values(self, source: HloInstruction) -> list[HloInstruction]:
        """The per-row instructions a broadcast in the group was admitted with."""
        return next((v for v in self.row_values.values() if v and v[-1] is source), [])

    def _row_expression(self, source: HloInstruction,
                        broadcast_dims: tuple[int, ...]) -> tuple[tuple[int, ...], list[HloInstruction]] | None:
        """Is ``source`` a per-row value -- row reductions of group-shaped values, combined by
        elementwise ops over the kept dimensions (``mean = sum / n``, ``rsqrt(var + eps)``) -- that
        the broadcast puts back over the rows? Then (the row dimensions, its instructions in
        post order, ``source`` last)."""
        kept = tuple(self.dims[d] for d in broadcast_dims)
        row = self.row
        found: list[HloInstruction] = []

        def visit(v: HloInstruction) -> bool:
            nonlocal row
            if v in found:
                return True
            if v.opcode == "reduce":
                r = self._row_reduce(v, broadcast_dims)
                if r is None or (row is not None and r != row):
                    return False
                row = r
            elif v.opcode == "constant":
                if v.shape.rank != 0:
                    return False
            elif tuple(v.shape.dimensions) != kept or v.shape.is_tuple:
                return False
            elif v.opcode == "broadcast":
                if v.operand(0).shape.rank != 0 or not visit(v.operand(0)):
                    return False
            elif not is_elementwise(v.opcode) or not all(visit(op) for op in v.operands):
                return False
            found.append(v)
            return True

        if not visit(source) or row is None:
            return None
        return row, found

    def _row_reduce(self, reduce: HloInstruction, broadcast_dims: tuple[int, ...]) -> tuple[int, ...] | None:
        """The row dimensions, if ``reduce`` reduces rows of a group-shaped value (the minor-most
        dimensions in memory) and the broadcast puts its result back over them."""
        if reduce.operand_count != 2 or tuple(reduce.operand(0).shape.dimensions) != self.dims:
            return None
        row = tuple(sorted(reduce.attrs["dimensions"]))
        kept = tuple(d for d in range(len(self.dims)) if d not in row)
        layout = reduce.operand(0).shape.minor_to_major()
        if not row or broadcast_dims != kept or set(layout[: len(row)]) != set(row):
            return None
        if reduce.operand(1).opcode != "constant":
            return None
        return row


class RowFusion(HloPass):
    name = "row-fusion"

    def __init__(self, backend: str = "cpu") -> None:
        super().__init__()
        self.config = row_fusion_config(backend)

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
                fusion.backend_config = self.config
                fused.update(group.members)
                order = [i for i in reversed(comp.post_order()) if i.unique_id in group.members and i is not root]
                for producer in order:
                    if producer in fusion.operands:
                        fuse_producer(fusion, producer)
                self.note(f"{fusion.name}: {len(group.members)} instructions with {group.reduces} row reductions "
                          f"in one kernel")
                changed = True
        return changed
