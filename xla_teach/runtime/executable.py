"""Executables: thunk sequences over assigned buffers, callable with NumPy arrays.

A :class:`SequenceExecutable` runs one computation (the entry, a loop body, a
branch): it binds the caller's arrays to the parameter allocations, makes fresh
output arrays, runs its thunks in schedule order, and returns the root's leaves.
An :class:`Executable` wraps the entry sequence with argument checking and keeps
the compiled artefacts (optimized HLO, buffer assignment, LLVM IR, assembly)
for introspection.

**Donated arguments.** When the module's ``input_output_alias`` lets an output live
in a parameter's buffer (``jit(f, donate_argnums=...)``), the kernels write that
output straight into the caller's array -- no output buffer is allocated -- and the
returned array is a view of it. The donated array's old contents are gone, as after
JAX's ``donate_argnums``: do not use it again except through the result. An argument
that cannot be written in place (read-only, another dtype or memory order, or also
passed for another parameter) is copied first, and then stays untouched.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.literal import literal_at
from xla_teach.passes.pass_base import PassRecorder
from xla_teach.passes.scheduling.buffer_assignment import BufferAssignment, ModuleBufferAssignment
from xla_teach.runtime.buffers import OUTPUT_POOL, RunBuffers, aligned_empty, logical_view, to_physical
from xla_teach.runtime.denormals import run_flushing_denormals
from xla_teach.runtime.thunks import KernelThunk, Profiler, Thunk


def _writable_alone(array: np.ndarray, others: Sequence[object]) -> bool:
    """May the runtime write ``array`` in place: writable, and no other argument shares its bytes?"""
    return bool(array.flags.writeable) and not any(
        isinstance(o, np.ndarray) and np.may_share_memory(array, o) for o in others)


def flatten_arguments(values: Sequence[object]) -> list[np.ndarray]:
    leaves: list[np.ndarray] = []
    for value in values:
        if isinstance(value, tuple):
            leaves.extend(flatten_arguments(value))
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
            for idx in param.shape.leaf_indices():
                value = assignment.value(param, idx)
                self.parameter_leaves.append((assignment.slice(param, idx).allocation.index, value.shape))
        self.constants: dict[int, np.ndarray] = {}
        for alloc in assignment.allocations:
            if alloc.kind == "constant":
                value = alloc.values[0][0]
                leaf = literal_at(value.instruction.literal, value.index)  # a tuple constant's element
                self.constants[alloc.index] = to_physical(leaf, value.shape)
        temp = assignment.temp_allocation
        self.temp_arena = aligned_empty(temp.size) if temp is not None else None
        self._arena_in_use = threading.Lock()  # a second caller at the same time gets its own arena
        self._fast: _FastPlan | bool | None = None  # made on the first run; False: not this sequence
        root_leaves = comp.root.shape.leaf_indices()
        self.outputs = [(assignment.slice(comp.root, idx), comp.root.shape.subshape(idx)) for idx in root_leaves]
        self.output_allocations = [a for a in assignment.allocations if a.kind == "output"]
        # Per call, a tiny program's time is mostly this walk: decide the layouts once. A parameter
        # in the default layout is bound as it is (ascontiguousarray only); an output in the default
        # layout is a dtype view of its bytes, reshaped.
        self._plain_params = [shape.has_default_layout() or shape.rank < 2  # type: ignore[attr-defined]
                              for _, shape in self.parameter_leaves]
        self._plain_outputs = [None if shape.is_token or s.allocation.kind == "constant" or not (
            shape.has_default_layout() or shape.rank < 2) else (s.allocation.index, s.offset, s.size, shape.dtype,
                                                                tuple(shape.dimensions))
                               for s, shape in self.outputs]
        # Donation: parameter leaf position -> output leaf position that ends up in its buffer;
        # and the must-alias outputs buffer assignment could not place there (copied at the end).
        param_leaves = [(p.parameter_number, idx) for p in comp.parameter_instructions
                        for idx in p.shape.leaf_indices()]
        self.donated: dict[int, int] = {}
        self.copy_back: list[tuple[int, int]] = []  # (output leaf position, parameter leaf position)
        for alias in assignment.output_aliases:
            if alias.shared or alias.kind == "must-alias":
                param_pos = param_leaves.index((alias.parameter_number, alias.parameter_index))
                out_pos = root_leaves.index(alias.output_index)
                self.donated[param_pos] = out_pos
                if not alias.shared:
                    self.copy_back.append((out_pos, param_pos))

    def run(self, leaves: Sequence[np.ndarray], profiler: Profiler | None = None) -> list[np.ndarray]:
        """Run on flattened parameter leaves; returns the root's leaves (logical arrays)."""
        if self._arena_in_use.acquire(blocking=False):
            try:
                if profiler is None and self._fast is not False:
                    if self._fast is None:
                        self._fast = _FastPlan.of(self) or False
                    if self._fast is not False:
                        return self._fast.run(leaves)
                return self._run(leaves, profiler, self.temp_arena)
            finally:
                self._arena_in_use.release()
        size = self.assignment.temp_allocation.size if self.assignment.temp_allocation is not None else 0
        return self._run(leaves, profiler, aligned_empty(size) if self.temp_arena is not None else None)

    def _run(self, leaves: Sequence[np.ndarray], profiler: Profiler | None,
             temp_arena: np.ndarray | None) -> list[np.ndarray]:
        buffers = RunBuffers(self.assignment, self.constants, temp_arena)
        bound: list[np.ndarray] = []
        for n, ((alloc_index, shape), array) in enumerate(zip(self.parameter_leaves, leaves, strict=True)):
            physical = (np.ascontiguousarray(array) if self._plain_params[n]
                        else to_physical(np.asarray(array), shape))  # type: ignore[arg-type]
            if n in self.donated and not _writable_alone(physical, [a for k, a in enumerate(leaves) if k != n]):
                physical = np.array(physical, copy=True)
            buffers.bind(alloc_index, physical)
            bound.append(physical)
        for alloc in self.output_allocations:
            buffers.bind(alloc.index, OUTPUT_POOL.take(alloc.size))
        for thunk in self.thunks:
            thunk.execute(buffers, profiler)
        results = []
        for (slice_, shape), plain in zip(self.outputs, self._plain_outputs, strict=True):
            if plain is not None:
                index, offset, size, dtype, dims = plain
                owner = buffers.arrays[index]
                assert owner is not None, f"allocation {index} is not bound"
                results.append(owner.reshape(-1).view(np.uint8)[offset:offset + size].view(dtype).reshape(dims))
                continue
            kind = slice_.allocation.kind
            if shape.is_token:  # no data: the same token value the interpreter returns
                from xla_teach.hlo.evaluator.registry import TOKEN

                results.append(TOKEN)  # type: ignore[arg-type]
            elif kind == "constant":
                results.append(np.array(logical_view(self.constants[slice_.allocation.index], shape)))
            else:
                results.append(buffers.array(slice_, shape))
        for out_pos, param_pos in self.copy_back:  # must-alias outputs buffer assignment could not place
            home = logical_view(bound[param_pos].reshape(-1), self.outputs[out_pos][1])
            value = np.array(results[out_pos], copy=True)
            for k, other in enumerate(results):  # results still reading the old contents keep them
                if np.may_share_memory(other, home):
                    results[k] = np.array(other, copy=True)
            np.copyto(home, value)
            results[out_pos] = home
        return results

    def run_as_fixed_loop(self, condition: object, state: list[np.ndarray],
                          profiler: Profiler | None = None) -> tuple[list[np.ndarray], int] | None:
        """As a while body with ``condition``: the whole loop with buffers bound once
        (``runtime/fixed_loop.py``), or None when this loop does not qualify."""
        from xla_teach.runtime.fixed_loop import run_fixed_loop

        if not isinstance(condition, SequenceExecutable) or not self.donated:
            return None
        return run_fixed_loop(condition, self, state, profiler)

    def donated_output(self, leaf: int) -> bool:
        """Does output leaf ``leaf`` live in a donated parameter's buffer?"""
        return leaf in self.donated.values()

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
    assembly_text: str = ""
    ptx: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    make_assembly: Callable[[], str] | None = field(default=None, repr=False)  # for assembly made on demand

    @property
    def assembly(self) -> str:
        if not self.assembly_text and self.make_assembly is not None:
            self.assembly_text = self.make_assembly()
            self.make_assembly = None
        return self.assembly_text


class CompiledExecutable:
    """What every backend's compiled executable declares (CPU, GPU, interpreter).

    The backend sets ``backend``, ``module`` (the optimized module) and ``artifacts``;
    ``buffer_assignment`` where it assigns buffers. The compile driver
    (:func:`xla_teach.api.compile_module`) then attaches what compiling recorded: ``recorder``
    (every pass run), ``compile_timings`` (seconds per stage) and ``dumper`` when dumps were
    written. ``execute(args, profiler)`` runs it on arrays in ENTRY parameter order.
    """

    backend: str = ""
    arch: str = ""  # the target architecture where it matters (the GPU's sm_80...)
    module: HloModule
    artifacts: CompiledArtifacts
    buffer_assignment: ModuleBufferAssignment | None = None
    recorder: PassRecorder | None = None
    compile_timings: Mapping[str, float] = MappingProxyType({})
    dumper: Any = None

    def execute(self, args: Sequence[np.ndarray], profiler: Profiler | None = None) -> list[np.ndarray]:
        raise NotImplementedError

    def thunks(self) -> list[Any]:
        """The ENTRY computation's thunks, in order, where the backend runs thunks on the host."""
        return []


class Executable(CompiledExecutable):
    """A CPU-compiled module: ``execute(args)`` with arrays in ENTRY parameter order."""

    def __init__(self, module: HloModule, entry: SequenceExecutable, artifacts: CompiledArtifacts,
                 backend: str) -> None:
        self.module = module
        self.entry = entry
        self.artifacts = artifacts
        self.backend = backend
        self.keep_alive: object = None  # e.g. the JIT engine owning the machine code
        self._parameters = module.entry.parameter_instructions  # found once, not on every call
        # (dimensions, dtype) of each array parameter: a call whose arguments are exactly such
        # arrays skips the general checks and conversions (None: a tuple or token parameter).
        self._array_specs = [(p.shape.dimensions, p.shape.dtype) if p.shape.is_array else None
                             for p in self._parameters]
        # Outputs that may share bytes with an argument or with each other (passed-through or
        # donated parameters, constants, control-flow results): only those are checked for it.
        self._may_alias = [slice_.allocation.kind != "output" or self._shares_allocation(slice_)
                           for slice_, _ in entry.outputs]
        self.flush_denormals = False  # the CPU backend's runs flush them, as XLA's CPU runtime does

    def thunks(self) -> list[Any]:
        return list(self.entry.thunks)

    def _shares_allocation(self, slice_: object) -> bool:
        allocation = slice_.allocation  # type: ignore[attr-defined]
        return sum(s.allocation is allocation for s, _ in self.entry.outputs) > 1

    def _plain_arrays(self, args: Sequence[object]) -> bool:
        """Are ``args`` exactly one NumPy array of the right dimensions and dtype per parameter?"""
        specs = self._array_specs
        if type(args) not in (list, tuple) or len(args) != len(specs):
            return False
        for arg, spec in zip(args, specs):  # noqa: B905 - lengths checked above
            if spec is None or type(arg) is not np.ndarray or arg.shape != spec[0] or arg.dtype != spec[1]:
                return False
        return True

    def execute(self, args: Sequence[np.ndarray], profiler: Profiler | None = None) -> list[np.ndarray]:
        from xla_teach.hlo.evaluator.arguments import check_arguments

        if self._plain_arrays(args):
            leaves = list(args)
        else:
            leaves = flatten_arguments(check_arguments(self.module.entry, args, self._parameters))
        if self.flush_denormals:
            outputs = run_flushing_denormals(self.entry.run, leaves, profiler)
        else:
            outputs = self.entry.run(leaves, profiler)
        # Never hand the caller one of its own arrays (or one output twice): copy those -- except
        # outputs written into a donated argument, which are the point of donating it.
        if not self.entry.donated and not any(self._may_alias):
            return outputs  # fresh output buffers, each its own
        seen: list[np.ndarray] = []
        results = []
        for n, out in enumerate(outputs):
            donated = self.entry.donated_output(n)
            others = [a for k, a in enumerate(leaves) if not (donated and self.entry.donated.get(k) == n)]
            if any(np.may_share_memory(out, a) for a in others) or any(np.may_share_memory(out, s) for s in seen):
                out = np.array(out, copy=True)
            seen.append(out)
            results.append(out)
        return results


@dataclass
class _FastKernel:
    thunk: KernelThunk
    args: ctypes.Array  # the buffer table: constants and temporaries filled once
    patches: list[tuple[int, int, int]]  # (slot, index into the call's addresses, offset)


class _FastPlan:
    """A sequence of kernels only, on arguments and results in the default layout: each
    kernel's buffer table is filled once, except for the slots of the arguments and the
    outputs, patched on every call. What a tiny program costs per call is then its kernels'
    calls, the new outputs and a few address writes -- not the walk that binds every
    allocation (a 16-element add: 14.7 -> 8 us per call). Used under the sequence's arena lock."""

    def __init__(self, seq: SequenceExecutable, kernels: list[_FastKernel], params: list[int],
                 outputs: list[tuple[int, int]],
                 results: list[tuple[int, int, int, np.dtype, tuple[int, ...]]]) -> None:
        self.seq = seq
        self.kernels = [(k.thunk.run_table, k.args, k.patches) for k in kernels]
        self.params = params  # parameter leaf n -> its slot in the call's addresses
        self.outputs = outputs  # (slot in the call's addresses, bytes) per output allocation
        self.results = results  # (output allocation's position, offset, bytes, dtype, dims) per result
        self.addresses = [0] * (len(params) + len(outputs))  # reused: runs hold the arena lock

    @staticmethod
    def of(seq: SequenceExecutable) -> _FastPlan | None:
        if (not seq.thunks or any(type(t) is not KernelThunk for t in seq.thunks) or seq.donated or seq.copy_back
                or not all(seq._plain_params) or any(p is None for p in seq._plain_outputs)):
            return None
        slot_of: dict[int, int] = {}  # allocation index -> slot in the call's addresses
        for alloc_index, _ in seq.parameter_leaves:
            slot_of.setdefault(alloc_index, len(slot_of))
        outputs = []
        for alloc in seq.output_allocations:
            slot_of[alloc.index] = len(slot_of)
            outputs.append((slot_of[alloc.index], alloc.size))
        output_position = {alloc.index: k for k, alloc in enumerate(seq.output_allocations)}
        results = []
        for plain in seq._plain_outputs:
            index, offset, size, dtype, dims = plain  # type: ignore[misc]
            if index not in output_position:
                return None  # a result that is an argument: the general path copies it
            results.append((output_position[index], offset, size, dtype, dims))
        fixed = RunBuffers(seq.assignment, seq.constants, seq.temp_arena)
        kernels = []
        for thunk in seq.thunks:
            args = (ctypes.c_void_p * max(len(thunk.slices), 1))()  # type: ignore[attr-defined]
            patches = []
            for i, slice_ in enumerate(thunk.slices):  # type: ignore[attr-defined]
                index = slice_.allocation.index
                if index in slot_of:
                    patches.append((i, slot_of[index], slice_.offset))
                elif slice_.allocation.kind in ("constant", "temp"):
                    args[i] = fixed.address(slice_)
                else:
                    return None
            kernels.append(_FastKernel(thunk, args, patches))  # type: ignore[arg-type]
        params = [slot_of[alloc_index] for alloc_index, _ in seq.parameter_leaves]
        return _FastPlan(seq, kernels, params, outputs, results)

    def run(self, leaves: Sequence[np.ndarray]) -> list[np.ndarray]:
        addresses = self.addresses
        if len(leaves) != len(self.params):
            raise ValueError(f"{self.seq.name} takes {len(self.params)} arguments, got {len(leaves)}")
        keep = [np.ascontiguousarray(leaf) for leaf in leaves]  # alive until the kernels are done
        for slot, array in zip(self.params, keep):  # noqa: B905 - lengths checked above
            addresses[slot] = _address(array)
        blocks = []
        for slot, size in self.outputs:
            block = OUTPUT_POOL.take(size)
            blocks.append(block)
            addresses[slot] = _address(block)
        for run_table, args, patches in self.kernels:
            for i, slot, offset in patches:
                args[i] = addresses[slot] + offset
            run_table(args)
        return [blocks[k][offset:offset + size].view(dtype).reshape(dims)
                for k, offset, size, dtype, dims in self.results]



def _address(array: np.ndarray) -> int:
    """The address of ``array``'s first byte: through the buffer protocol (a quarter of a
    microsecond), or NumPy's ``ctypes`` attribute (one) for a read-only or empty array."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):
        return int(array.ctypes.data)
