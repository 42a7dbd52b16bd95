"""From a scheduled, buffer-assigned module to LLVM IR kernels and thunk plans.

For every sequential computation (the entry, loop bodies and conditions, branches,
called computations) the emitter walks the schedule and decides, per
instruction, what the runtime must do:

* nothing -- ``parameter``, ``constant``, ``tuple``, ``get-tuple-element``,
  ``bitcast``, ``opt-barrier`` only name buffers that already exist;
* a kernel -- one LLVM function per fusion or unfused op, named after it;
* a host step -- ``while``, ``conditional``, ``call`` (nested sequences) and
  ``custom-call`` (a Python target).

Kernels are chosen by the instruction's *hero* (a fusion's root): reductions get
the reduction emitter, dots the dot emitter, sort/scatter/... their own, and
everything else the loop emitter. A module with ``rng-get-and-update-state`` also
gets ``rng_state_reset``, the entry's first kernel (see :mod:`.kernels.rng`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from llvmlite import ir

from xla_teach.backends.cpu.kernel_builder import KernelBuilder, llvm_name
from xla_teach.backends.cpu.kernels.context import KernelContext
from xla_teach.backends.cpu.kernels.dot import emit_dot_kernel, find_dot
from xla_teach.backends.cpu.kernels.loop import emit_loop_kernel
from xla_teach.backends.cpu.kernels.reduction import emit_reduction_kernel, is_reduction_hero
from xla_teach.backends.cpu.kernels.rng import (
    RNG_STATE_GLOBAL,
    emit_rng_bit_generator_kernel,
    emit_rng_get_and_update_state_kernel,
    emit_rng_state_reset,
)
from xla_teach.backends.cpu.kernels.row_fusion import emit_row_fusion_kernel
from xla_teach.backends.cpu.kernels.scatter import (
    emit_dynamic_update_slice_kernel,
    emit_scatter_kernel,
    emit_select_and_scatter_kernel,
)
from xla_teach.backends.cpu.kernels.sort import emit_sort_kernel
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.passes.fusion.row_fusion import is_row_fusion
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, BufferSlice, ModuleBufferAssignment

NO_THUNK = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "opt-barrier", "after-all"}
HOST_CONTROL = {"while", "conditional", "call", "custom-call"}
# Opcodes without a kernel: the pipeline's expanders rewrite them (xla_teach/passes/expanders/).
EXPANDED_BY = {"rng": "rng-expander", "topk": "topk-decomposer"}


@dataclass
class KernelPlan:
    name: str
    instruction: str
    slices: list[BufferSlice]
    outer_size: int
    partitions: int
    nbytes: int


@dataclass
class HostPlan:
    instruction: HloInstruction


@dataclass
class SequencePlan:
    computation: HloComputation
    assignment: BufferAssignment
    steps: list[KernelPlan | HostPlan] = field(default_factory=list)


def _leaves(shape: Shape) -> list[Shape]:
    return shape.leaf_shapes()


class CpuIrEmitter:
    def __init__(self, module: HloModule, assignments: ModuleBufferAssignment) -> None:
        self.module = module
        self.assignments = assignments
        self.llvm_module = ir.Module(name=llvm_name(module.name))
        self.comments: dict[str, str] = {}
        self.sequences: dict[str, SequencePlan] = {}
        self._names: set[str] = set()

    def emit_all(self) -> dict[str, SequencePlan]:
        for name, assignment in self.assignments.computations.items():
            self.sequences[name] = self._emit_sequence(assignment)
        if RNG_STATE_GLOBAL in self.llvm_module.globals:
            # A fresh run starts the legacy rng's Philox counter at 0, as the interpreter does.
            self.sequences[self.module.entry.name].steps.insert(0, self._emit_rng_state_reset())
        return self.sequences

    def _emit_rng_state_reset(self) -> KernelPlan:
        name = self._unique_symbol("rng_state_reset")
        kb = KernelBuilder(self.llvm_module, name, [], [])
        emit_rng_state_reset(kb.b, self.llvm_module)
        kb.finish()
        self.comments[name] = "(no HLO) the Philox state of rng-get-and-update-state := {key, 0}"
        return KernelPlan(name, "rng_state_reset", [], 1, 1, 0)

    def _emit_sequence(self, assignment: BufferAssignment) -> SequencePlan:
        plan = SequencePlan(assignment.computation, assignment)
        for instr in assignment.order:
            if instr.opcode in NO_THUNK:
                continue
            if instr.opcode in HOST_CONTROL:
                plan.steps.append(HostPlan(instr))
                continue
            plan.steps.append(self._emit_kernel(instr, assignment))
        return plan

    def symbol(self, name: str) -> str:
        """``name`` as this target allows it in a symbol (the GPU emitter is stricter)."""
        return llvm_name(name)

    def _kernel_name(self, instr: HloInstruction) -> str:
        """The instruction's name as a unique symbol (``add.1``, then ``add.1_k1`` ... if taken)."""
        return self._unique_symbol(instr.name)

    def _unique_symbol(self, name: str) -> str:
        base = self.symbol(name)
        name, n = base, 1
        while name in self._names:
            name, n = f"{base}_k{n}", n + 1
        self._names.add(name)
        return name

    def _emit_kernel(self, instr: HloInstruction, assignment: BufferAssignment) -> KernelPlan:
        operand_slices, operand_shapes = [], []
        for op in instr.operands:
            if op.shape.is_tuple or op.shape.is_token:
                raise NotImplementedError(f"{instr.name}: kernels take array operands, {op.name} is {op.shape}")
            operand_slices.append(assignment.slice(op))
            operand_shapes.append(op.shape)
        output_slices = assignment.leaf_slices(instr)
        output_shapes = _leaves(instr.shape)
        name = self._kernel_name(instr)
        slices = operand_slices + output_slices
        kb = KernelBuilder(self.llvm_module, name, operand_shapes + output_shapes, slices)
        ctx = KernelContext(kb, instr, kb.arrays[: len(operand_shapes)], kb.arrays[len(operand_shapes):])
        emit = self._choose(instr, assignment)
        outer, partitions = emit(ctx)
        kb.finish()
        self.comments[name] = _hlo_comment(instr)
        nbytes = sum(s.size for s in slices)
        return KernelPlan(name, instr.name, slices, outer, partitions, nbytes)

    def _choose(self, instr: HloInstruction,
                assignment: BufferAssignment) -> Callable[[KernelContext], tuple[int, int]]:
        op = instr.opcode
        if op == "sort":
            return emit_sort_kernel
        if op == "scatter":
            return emit_scatter_kernel
        if op == "select-and-scatter":
            return emit_select_and_scatter_kernel
        if op == "rng-bit-generator":
            return emit_rng_bit_generator_kernel
        if op == "rng-get-and-update-state":
            return emit_rng_get_and_update_state_kernel
        if op == "dynamic-update-slice":
            in_place = assignment.slice(instr) == assignment.slice(instr.operand(0))
            return lambda ctx: emit_dynamic_update_slice_kernel(ctx, in_place)
        if op in EXPANDED_BY:
            raise NotImplementedError(
                f"{instr.name}: '{op}' has no kernel; the '{EXPANDED_BY[op]}' pass rewrites it before code "
                "generation, and it did not run (--xla_disable_hlo_passes?)")
        if is_row_fusion(instr):
            return emit_row_fusion_kernel
        hero = instr.fused_computation.root if op == "fusion" else instr
        if is_reduction_hero(hero):
            return emit_reduction_kernel
        if op == "dot" or (op == "fusion" and find_dot_in(instr) is not None):
            return emit_dot_kernel
        return emit_loop_kernel


def find_dot_in(fusion: HloInstruction) -> HloInstruction | None:
    for instr in fusion.fused_computation.instructions:
        if instr.opcode == "dot":
            return instr
    return None


def _hlo_comment(instr: HloInstruction) -> str:
    lines = [instr.to_text(print_metadata=False)]
    if instr.opcode == "fusion":
        lines += ["  " + i.to_text(print_metadata=False) for i in instr.fused_computation.instructions]
    return "\n".join(lines)


__all__ = ["CpuIrEmitter", "HostPlan", "KernelPlan", "SequencePlan", "find_dot"]
