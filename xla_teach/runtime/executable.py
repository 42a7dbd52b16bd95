"""Executables: thunk sequences over assigned buffers, callable with NumPy arrays.

A :class:`SequenceExecutable` runs one computation (the entry, a loop body, a
branch): it binds the caller's arrays to the parameter allocations, makes fresh
output arrays, runs its thunks in schedule order, and returns the root's leaves.
An :class:`Executable` wraps the entry sequence with argument checking and keeps
the compiled artefacts (optimized HLO, buffer assignment, LLVM IR, assembly)
for introspection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from xla_teach.hlo.ir import HloModule
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, leaf_indices
from xla_teach.runtime.buffers import OUTPUT_POOL, RunBuffers, aligned_empty, logical_view, to_physical
from xla_teach.runtime.thunks import Profiler, Thunk


def _subshape(shape, index):  # type: ignore[no-untyped-def]
    for i in index:
        shape = shape.tuple_shapes[i]
    return shape


def _flatten(values: Sequence[object]) -> list[np.ndarray]:
    leaves: list[np.ndarray] = []
    for value in values:
        if isinstance(value, tuple):
            leaves.extend(_flatten(value))
        else:
            leaves.append(value)  # type: ignore[arg-type]
    return leaves


class SequenceExecutable:
    """One computation as a list of thunks over its buffer assignment."""

    def __init__(self, assignment: BufferAssignment, thunks: list[Thunk]) -> None:
        self.assignment = assignment
        self.thunks = thunks
        comp = assignment.computation
        self.name = comp.name
        # Parameter leaves in flattened order -> allocation index.
        self.parameter_leaves: list[tuple[int, object]] = []
        for param in comp.parameter_instructions:
            for idx in leaf_indices(param.shape):
                value = assignment.value(param, idx)
                self.parameter_leaves.append((assignment.slice(param, idx).allocation.index, value.shape))
        self.constants: dict[int, np.ndarray] = {}
        for alloc in assignment.allocations:
            if alloc.kind == "constant":
                value = alloc.values[0][0]
                self.constants[alloc.index] = to_physical(value.instruction.literal, value.shape)
        temp = assignment.temp_allocation
        self.temp_arena = aligned_empty(temp.size) if temp is not None else None
        self.outputs = [(assignment.slice(comp.root, idx), _subshape(comp.root.shape, idx))
                        for idx in leaf_indices(comp.root.shape)]
        self.output_allocations = [a for a in assignment.allocations if a.kind == "output"]

    def run(self, leaves: Sequence[np.ndarray], profiler: Profiler | None = None) -> list[np.ndarray]:
        """Run on flattened parameter leaves; returns the root's leaves (logical arrays)."""
        buffers = RunBuffers(self.assignment, self.constants, self.temp_arena)
        for (alloc_index, shape), array in zip(self.parameter_leaves, leaves, strict=True):
            physical = to_physical(np.asarray(array), shape)  # type: ignore[arg-type]
            buffers.bind(alloc_index, physical)
        for alloc in self.output_allocations:
            buffers.bind(alloc.index, OUTPUT_POOL.take(alloc.size))
        for thunk in self.thunks:
            thunk.execute(buffers, profiler)
        results = []
        for slice_, shape in self.outputs:
            kind = slice_.allocation.kind
            if kind == "constant":
                results.append(np.array(logical_view(self.constants[slice_.allocation.index], shape)))
            else:
                results.append(buffers.array(slice_, shape))
        return results

    def describe(self) -> str:
        lines = [f"{self.name}:"]
        lines += [f"  {t.describe()}" for t in self.thunks]
        return "\n".join(lines)


@dataclass
class CompiledArtifacts:
    """What compilation produced, kept for ``Lowered.as_text`` and dumps."""

    optimized_module: HloModule
    buffer_assignment_text: str = ""
    llvm_ir: str = ""
    optimized_llvm_ir: str = ""
    assembly: str = ""
    ptx: str = ""
    extra: dict[str, str] = field(default_factory=dict)


class Executable:
    """A compiled module: ``execute(args)`` with arrays in ENTRY parameter order."""

    def __init__(self, module: HloModule, entry: SequenceExecutable, artifacts: CompiledArtifacts,
                 backend: str) -> None:
        self.module = module
        self.entry = entry
        self.artifacts = artifacts
        self.backend = backend
        self.keep_alive: object = None  # e.g. the JIT engine owning the machine code

    def execute(self, args: Sequence[np.ndarray], profiler: Profiler | None = None) -> list[np.ndarray]:
        from xla_teach.hlo.evaluator.arguments import check_arguments

        leaves = _flatten(check_arguments(self.module.entry, args))
        outputs = self.entry.run(leaves, profiler)
        # Never hand the caller one of its own arrays (or one output twice): copy those.
        seen: list[np.ndarray] = []
        results = []
        for out in outputs:
            if any(np.may_share_memory(out, a) for a in leaves) or any(np.may_share_memory(out, s) for s in seen):
                out = np.array(out, copy=True)
            seen.append(out)
            results.append(out)
        return results
