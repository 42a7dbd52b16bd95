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
* a kernel -- one LLVM function per fusion or unfused op, named after it, which the backend's
  emitter writes (:meth:`IrEmitterBase.emit_kernel`).

A module with ``rng-get-and-update-state`` also gets a kernel that resets the legacy rng's
state, first in the entry (see :mod:`xla_teach.backends.llvm.kernels.rng`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from xla_teach.backends.llvm.kernel_support import llvm_name
from xla_teach.backends.llvm.kernels.rng import RNG_STATE_GLOBAL
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import CROSS_DEVICE_OPCODES
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, ModuleBufferAssignment

NO_THUNK = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "opt-barrier", "after-all"}
HOST_CONTROL = {"while", "conditional", "call", "custom-call"}
# Opcodes without a kernel: the pipeline's expanders rewrite them (xla_teach/passes/expanders/).
EXPANDED_BY = {"rng": "rng-expander", "topk": "topk-decomposer"}


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

    # ---- what a backend provides ------------------------------------------------------------
    def emit_kernel(self, instr: HloInstruction, assignment: BufferAssignment) -> Any:
        """Write the kernel of ``instr``; returns the backend's plan for launching it."""
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
