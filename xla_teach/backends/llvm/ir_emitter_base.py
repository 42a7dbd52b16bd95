"""The walk every LLVM backend makes over a scheduled, buffer-assigned module.

For every sequential computation (the entry, loop bodies and conditions, branches, called
computations) the emitter goes through the schedule and decides, per instruction, what the
runtime must do:

* nothing -- ``parameter``, ``constant``, ``tuple``, ``get-tuple-element``, ``bitcast``,
  ``opt-barrier`` only name buffers that already exist;
* a host step -- ``while``, ``conditional``, ``call`` (nested sequences) and ``custom-call``;
  in a module for several devices also the collectives and ``partition-id``/``replica-id``,
  which the runtime's host thunks compute with the other devices (on one device they are
  kernels: a collective among one device returns its operand);
* a kernel -- one LLVM function per fusion or unfused op, named after it. Which emitter writes
  it is a table per backend (``KERNELS``: a list of :class:`KernelRule`, the first that applies
  wins), read top to bottom like XLA's ``IrEmitter`` dispatch; :meth:`IrEmitterBase.emit_kernel`
  does the rest the same way for every backend (the kernel's buffers, its builder, the comment).

A module with ``rng-get-and-update-state`` also gets a kernel that resets the legacy rng's
state, first in the entry (see :mod:`xla_teach.backends.llvm.kernels.rng`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from xla_teach.backends.llvm.kernel_context import KernelContext
from xla_teach.backends.llvm.kernel_support import hlo_comment, llvm_name
from xla_teach.backends.llvm.kernels.rng import RNG_STATE_GLOBAL
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import BUFFER_NAMING_OPCODES, CROSS_DEVICE_OPCODES, HOST_STEP_OPCODES
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, ModuleBufferAssignment

NO_THUNK = BUFFER_NAMING_OPCODES
HOST_CONTROL = HOST_STEP_OPCODES
# Opcodes without a kernel: the pipeline's expanders rewrite them (xla_teach/passes/expanders/).
EXPANDED_BY = {"rng": "rng-expander", "topk": "topk-decomposer", "scan": "scan-expander"}


Emit = Callable[[KernelContext], Any]  # writes a kernel's body; returns what the backend's plan needs


@dataclass(frozen=True)
class KernelRule:
    """One line of a backend's kernel table: for an instruction ``when(instr, assignment)`` holds
    for, ``emitter(ir_emitter, instr, assignment)`` is the function that writes its kernel."""

    name: str
    when: Callable[[HloInstruction, BufferAssignment], bool]
    emitter: Callable[[Any, HloInstruction, BufferAssignment], Emit]


def kernel(name: str, when: Callable[[HloInstruction, BufferAssignment], bool], emit: Emit) -> KernelRule:
    """A rule whose emitter does not depend on the instruction: ``kernel("sort", opcode("sort"), emit_sort)``."""
    return KernelRule(name, when, lambda _emitter, _instr, _assignment: emit)


def opcode(*names: str) -> Callable[[HloInstruction, BufferAssignment], bool]:
    return lambda instr, _assignment: instr.opcode in names


def writes_in_place(instr: HloInstruction, assignment: BufferAssignment) -> bool:
    """Whether ``instr`` shares its buffer with its first operand (a scatter or update in place)."""
    return not instr.shape.is_tuple and assignment.slice(instr) == assignment.slice(instr.operand(0))


def hero(instr: HloInstruction) -> HloInstruction:
    """What decides a kernel's shape: a fusion's root, or the instruction itself."""
    return instr.fused_computation.root if instr.opcode == "fusion" else instr


def no_kernel(instr: HloInstruction, _assignment: BufferAssignment) -> bool:
    return instr.opcode in EXPANDED_BY


def refuse_expanded(_emitter: Any, instr: HloInstruction, _assignment: BufferAssignment) -> Emit:
    raise NotImplementedError(f"{instr.name}: '{instr.opcode}' has no kernel; the '{EXPANDED_BY[instr.opcode]}' pass "
                              "rewrites it before code generation, and it did not run (--xla_disable_hlo_passes?)")


def choose_kernel(table: Sequence[KernelRule], instr: HloInstruction, assignment: BufferAssignment) -> KernelRule:
    """The first rule of ``table`` that applies to ``instr`` (a table ends with a rule for everything)."""
    for rule in table:
        if rule.when(instr, assignment):
            return rule
    raise NotImplementedError(f"{instr.name}: no kernel emitter for '{instr.opcode}'")


@dataclass
class HostPlan:
    instruction: HloInstruction


@dataclass
class SequencePlan:
    computation: HloComputation
    assignment: BufferAssignment
    steps: list[Any] = field(default_factory=list)  # the backend's kernel plans and HostPlans


class IrEmitterBase:
    """One LLVM module for the whole HLO module; subclasses write the kernels."""

    def __init__(self, module: HloModule, assignments: ModuleBufferAssignment) -> None:
        self.module = module
        self.assignments = assignments
        self.llvm_module = ir.Module(name=llvm_name(module.name))
        self.comments: dict[str, str] = {}
        self.sequences: dict[str, SequencePlan] = {}
        self._names: set[str] = set()
        self.several_devices = module.device_count() > 1

    def emit_all(self) -> dict[str, SequencePlan]:
        for name, assignment in self.assignments.computations.items():
            self.sequences[name] = self._emit_sequence(assignment)
        if RNG_STATE_GLOBAL in self.llvm_module.globals:
            # A fresh run starts the legacy rng's Philox counter at 0, as the interpreter does.
            self.sequences[self.module.entry.name].steps.insert(0, self.emit_rng_state_reset())
        return self.sequences

    def _emit_sequence(self, assignment: BufferAssignment) -> SequencePlan:
        plan = SequencePlan(assignment.computation, assignment)
        for instr in assignment.order:
            if instr.opcode in NO_THUNK:
                continue
            if instr.opcode in HOST_CONTROL or (self.several_devices and instr.opcode in CROSS_DEVICE_OPCODES):
                plan.steps.append(HostPlan(instr))
                continue
            plan.steps.append(self.emit_kernel(instr, assignment))
        return plan

    # ---- a kernel -------------------------------------------------------------------------------
    def emit_kernel(self, instr: HloInstruction, assignment: BufferAssignment) -> Any:
        """Write the kernel of ``instr`` with the emitter its backend's table chooses; returns the
        backend's plan for launching it (:meth:`kernel_plan`)."""
        operand_slices, operand_shapes = [], []
        for op in instr.operands:
            if op.shape.is_tuple or op.shape.is_token:
                raise NotImplementedError(f"{instr.name}: kernels take array operands, {op.name} is {op.shape}")
            operand_slices.append(assignment.slice(op))
            operand_shapes.append(op.shape)
        name = self.kernel_name(instr)
        slices = operand_slices + assignment.leaf_slices(instr)
        kb = self.kernel_builder(name, operand_shapes + instr.shape.leaf_shapes(), slices)
        ctx = KernelContext(kb, instr, kb.arrays[: len(operand_shapes)], kb.arrays[len(operand_shapes):])
        rule = choose_kernel(self.KERNELS, instr, assignment)
        result = rule.emitter(self, instr, assignment)(ctx)
        kb.finish()
        self.comments[name] = hlo_comment(instr)
        return self.kernel_plan(instr, name, slices, rule, result, ctx, assignment)

    # ---- what a backend provides ------------------------------------------------------------
    KERNELS: Sequence[KernelRule] = ()  # the backend's kernel table, first match wins

    def kernel_builder(self, name: str, shapes: list[Any], slices: list[Any]) -> Any:
        """The backend's builder of one kernel function (its signature, its buffers)."""
        raise NotImplementedError

    def kernel_plan(self, instr: HloInstruction, name: str, slices: list[Any], rule: KernelRule, result: Any,
                    ctx: KernelContext, assignment: BufferAssignment) -> Any:
        """The backend's plan for launching the kernel just written (``result``: what its emitter returned)."""
        raise NotImplementedError

    def emit_rng_state_reset(self) -> Any:
        """Write the kernel that resets the legacy rng's state; returns its plan."""
        raise NotImplementedError

    def symbol(self, name: str) -> str:
        """``name`` as this target allows it in a symbol (the GPU's PTX is stricter)."""
        return llvm_name(name)

    # ---- naming -------------------------------------------------------------------------------
    def kernel_name(self, instr: HloInstruction) -> str:
        """The instruction's name as a unique symbol (``add.1``, then ``add.1_k1`` ... if taken)."""
        return self.unique_symbol(instr.name)

    def unique_symbol(self, name: str) -> str:
        base = self.symbol(name)
        name, n = base, 1
        while name in self._names:
            name, n = f"{base}_k{n}", n + 1
        self._names.add(name)
        return name
