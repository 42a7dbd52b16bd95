"""Fuse attention -- a product, a row-wise softmax, a second product -- into one kernel
(``attention-fusion``).

JAX writes ``softmax(q @ k^T / sqrt(d)) @ v`` as a batched ``dot`` (the scores,
``[batch..., queries, keys]``), a row fusion for the scale and the softmax, and a second ``dot``
with ``v``. Run as written, the scores and the probabilities are a temporary as large as
``batch x queries x keys``: 8 MiB for 4 x 8 heads x 256 x 256 -- four times the output. XLA's CPU
backend computes the three as one fusion (YNNPACK's), with no temporary at all. So does this pass,
for the kernel of ``backends/cpu/kernels/attention.py``: a block of queries at a time, their scores
go into a tile on the stack, the softmax runs over the tile, and the tile times ``v`` is written
straight into the output. The scores never reach memory.

What is fused: ``O = dot(P, v)`` where ``P`` is a CPU row fusion used only by ``O``, reducing over
the keys (the last dimension), whose only non-scalar operand is ``S = dot(q, k)``, used only by
``P``; both products have the same leading batch dimensions, contract the keys (``O``) and the
head dimension (``S``), are f32 or f64 in the default layout and run on BLAS (``dot-strategy``
chose it). Inside the fusion the softmax keeps its row fusion, applied to the scores seen as
``[rows, keys]`` -- the form the kernel runs it in, one block of rows at a time -- and the
interpreter computes the fused computation as written. Anything else (a mask read from memory, a
softmax over another dimension) is left as it is, with a note saying why.

Before (a softmax without its max, to keep the example short)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    softmax {
      scores = f32[2,4,5] parameter(0)
      e = f32[2,4,5] exponential(scores)
      zero = f32[] constant(0)
      sum = f32[2,4] reduce(e, zero), dimensions={2}, to_apply=add
      sums = f32[2,4,5] broadcast(sum), dimensions={0,1}
      ROOT p = f32[2,4,5] divide(e, sums)
    }

    ENTRY main {
      q = f32[2,4,3] parameter(0)
      k = f32[2,5,3] parameter(1)
      s = f32[2,4,5] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
          rhs_contracting_dims={2}, backend_config={"dot_strategy":"blas"}
      p = f32[2,4,5] fusion(s), kind=kCustom, calls=softmax,
          backend_config={"fusion_backend_config":{"kind":"__cpu_row_fusion"}}
      v = f32[2,5,2] parameter(2)
      ROOT o = f32[2,4,2] dot(p, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
          rhs_contracting_dims={1}, backend_config={"dot_strategy":"blas"}
    }

After (the softmax now over ``[rows, keys]``, inside the attention fusion)::

    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }

    softmax.rows {
      scores.1 = f32[8,5] parameter(0)
      e.1 = f32[8,5] exponential(scores.1)
      zero.1 = f32[] constant(0)
      sum.1 = f32[8] reduce(e.1, zero.1), dimensions={1}, to_apply=add
      sums.1 = f32[8,5] broadcast(sum.1), dimensions={0}
      ROOT p.2 = f32[8,5] divide(e.1, sums.1)
    }

    fused_attention {
      q.1 = f32[2,4,3] parameter(0)
      k.1 = f32[2,5,3] parameter(1)
      scores.2 = f32[2,4,5] dot(q.1, k.1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
          rhs_contracting_dims={2}, backend_config={"dot_strategy":"blas"}
      rows = f32[8,5] reshape(scores.2)
      softmax = f32[8,5] fusion(rows), kind=kCustom, calls=softmax.rows,
          backend_config={"fusion_backend_config":{"kind":"__cpu_row_fusion"}}
      probs = f32[2,4,5] reshape(softmax)
      v.1 = f32[2,5,2] parameter(2)
      ROOT output = f32[2,4,2] dot(probs, v.1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
          rhs_contracting_dims={1}, backend_config={"dot_strategy":"blas"}
    }

    ENTRY main {
      q = f32[2,4,3] parameter(0)
      k = f32[2,5,3] parameter(1)
      v = f32[2,5,2] parameter(2)
      ROOT attention_fusion = f32[2,4,2] fusion(q, k, v), kind=kCustom, calls=fused_attention,
          backend_config={"fusion_backend_config":{"kind":"__cpu_attention"}}
    }
"""

from __future__ import annotations

from xla_teach.backends.cpu.kernels.attention import ATTENTION_CONFIG
from xla_teach.backends.cpu.kernels.dot import dot_strategy
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import is_elementwise
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.fusion.instruction_fusion import fusible_computations
from xla_teach.passes.fusion.row_fusion import ROW_FUSION_CONFIG
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_callee


def _leading(n: int) -> tuple[int, ...]:
    return tuple(range(n))


def attention_mismatch(o: HloInstruction) -> str | None:
    """Why ``o`` is not the second product of a fusable attention (None: it is)."""
    p = o.operand(0)
    if o.opcode != "dot" or p.opcode != "fusion" or p.backend_config != ROW_FUSION_CONFIG:
        return "not a product of a softmax"
    if len(p.users) != 1:
        return f"{p.name} is also used elsewhere"
    rank = o.shape.rank
    etype = o.shape.element_type
    if etype not in (PrimitiveType.F32, PrimitiveType.F64):
        return "not an f32/f64 product"
    batch = _leading(rank - 2)
    if (tuple(o.attr("lhs_batch_dims")) != batch or tuple(o.attr("rhs_batch_dims")) != batch
            or tuple(o.attr("lhs_contracting_dims")) != (rank - 1,)):
        return "the second product does not contract the keys after leading batch dimensions"
    reduces = [i for i in p.fused_computation.instructions if i.opcode == "reduce"]
    if any(tuple(r.attr("dimensions")) != (rank - 1,) for r in reduces):
        return "the softmax does not reduce over the keys"
    big = [i for i, op in enumerate(p.operands) if op.shape.rank != 0]
    if big != [0]:
        return "the softmax reads more than the scores (a mask?)"
    s = p.operand(0)
    if s.opcode != "dot" or len(s.users) != 1 or s.shape != p.shape:
        return "the softmax is not over a product used only by it"
    if (tuple(s.attr("lhs_batch_dims")) != batch or tuple(s.attr("rhs_batch_dims")) != batch
            or len(s.attr("lhs_contracting_dims")) != 1 or len(s.attr("rhs_contracting_dims")) != 1):
        return "the scores' product has other dimension numbers"
    operands = [s.operand(0), s.operand(1), o.operand(1)]
    if any(x.shape.rank != rank or x.shape.element_type is not etype for x in operands):
        return "mixed ranks or element types"
    if any(not x.shape.has_default_layout() for x in (*operands, s, p, o)):
        return "not in the default layout"
    if dot_strategy(s) != "blas" or dot_strategy(o) != "blas":
        return "dot-strategy did not choose BLAS for both products"
    return None


def rows_computation(fused: HloComputation, rows: int) -> HloComputation | None:
    """``fused`` (a row fusion over ``[batch..., queries, keys]``) rewritten over
    ``[rows, keys]``: per-row values become ``[rows]``. None when an instruction is not one of the
    forms that allows it (elementwise, scalar constants and broadcasts, reductions over the keys)."""
    root = fused.root
    rank = root.shape.rank
    keys = root.shape.dimensions[-1]

    def collapsed(shape: Shape) -> Shape | None:
        if shape.rank == 0:
            return shape
        if shape.rank == rank:
            return Shape.array(shape.element_type, (rows, keys))
        if shape.rank == rank - 1:
            return Shape.array(shape.element_type, (rows,))
        return None

    new = HloComputation(f"{fused.name}.rows")
    clones: dict[int, HloInstruction] = {}
    for instr in fused.post_order():
        shape = collapsed(instr.shape) if instr.shape.is_array else None
        if shape is None:
            return None
        operands = [clones[op.unique_id] for op in instr.operands]
        attrs_ok = True
        if instr.opcode == "broadcast":
            src = instr.operand(0).shape.rank
            if src == 0:
                dims: tuple[int, ...] = ()
            elif src == rank - 1 and tuple(instr.dimensions) == _leading(rank - 1):
                dims = (0,)
            else:
                attrs_ok = False
        elif instr.opcode == "reduce":
            attrs_ok = tuple(instr.attr("dimensions")) == (rank - 1,)
            dims = (1,)
        elif instr.opcode == "constant":
            attrs_ok = instr.shape.rank == 0
        elif instr.opcode != "parameter" and not is_elementwise(instr.opcode):
            attrs_ok = False
        if not attrs_ok:
            return None
        clone = instr.clone_with_new_operands(shape, operands)
        if instr.opcode in ("broadcast", "reduce"):
            clone.attrs["dimensions"] = dims
        new.add_instruction(clone, instr.name)
        clones[instr.unique_id] = clone
    new.root_instruction = clones[root.unique_id]
    return new


class AttentionFusion(HloPass):
    name = "attention-fusion"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for o in list(comp.instructions):
                if o.opcode != "dot" or o.parent is not comp:
                    continue
                why = attention_mismatch(o)
                if why is None:
                    why = self._fuse(comp, o)
                if why is None:
                    changed = True
                    self.note(f"{o.name}: product, softmax and product fused into one kernel")
                elif o.operand(0).opcode == "fusion" and o.operand(0).backend_config == ROW_FUSION_CONFIG:
                    self.note(f"{o.name}: not fused ({why})")
        return changed

    def _fuse(self, comp: HloComputation, o: HloInstruction) -> str | None:
        p = o.operand(0)
        s = p.operand(0)
        old_softmax = p.fused_computation
        n_rows = s.shape.element_count() // s.shape.dimensions[-1]
        rows_comp = rows_computation(p.fused_computation, n_rows)
        if rows_comp is None:
            return "the softmax has an instruction the row-by-row form cannot take"
        q, k, v = s.operand(0), s.operand(1), o.operand(1)
        scalars = list(p.operands[1:])
        fused = HloComputation("fused_attention")
        params = [fused.add_parameter(x.shape, name) for x, name in ((q, "q"), (k, "k"), (v, "v"))]
        params += [fused.add_parameter(x.shape, f"scalar.{n}") for n, x in enumerate(scalars)]
        scores = fused.add_instruction(s.clone_with_new_operands(s.shape, params[:2]), "scores")
        rows_shape = Shape.array(s.shape.element_type, (n_rows, s.shape.dimensions[-1]))
        rows = fused.add_instruction(HloInstruction("reshape", rows_shape, [scores]), "rows")
        add_callee(comp, rows_comp)
        softmax = fused.add_instruction(
            HloInstruction("fusion", rows_shape, [rows, *params[3:]],
                           {"kind": p.fusion_kind, "calls": rows_comp}), "softmax")
        softmax.backend_config = ROW_FUSION_CONFIG
        probs = fused.add_instruction(HloInstruction("reshape", p.shape, [softmax]), "probs")
        fused.root_instruction = fused.add_instruction(o.clone_with_new_operands(o.shape, [probs, params[2]]),
                                                       "output")
        add_callee(comp, fused)
        fusion = comp.add_instruction(
            HloInstruction("fusion", o.shape, [q, k, v, *scalars], {"kind": "kCustom", "calls": fused}),
            "attention_fusion")
        fusion.backend_config = ATTENTION_CONFIG
        fusion.metadata = o.metadata
        comp.instructions.remove(fusion)
        comp.instructions.insert(comp.instructions.index(o), fusion)
        comp.replace_instruction(o, fusion)  # removes p and s too: nothing else reads them
        module = comp.parent
        assert module is not None
        if not any(old_softmax in i.called_computations() for c in module.computations for i in c.instructions):
            module.remove_computation(old_softmax)
        return None
