"""The HLO IR: ``HloInstruction``, ``HloComputation`` and ``HloModule``.

An **instruction** is one operation: an opcode, a result shape, operands (other
instructions of the same computation) and attributes. It knows its users, so the
graph can be walked both ways.

A **computation** is a dataflow graph of instructions with numbered
``parameter`` instructions and one ``ROOT``. Computations call each other
(``to_apply=``, ``calls=``, ``body=``...), and a **module** owns them all and
marks one as ``ENTRY``.

Names are unique within a module, and new ones are made as XLA makes them:
``add``, ``add.1``, ``add.2`` ... (see :class:`NameUniquer`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from xla_teach.hlo.attributes import OpMetadata
from xla_teach.hlo.input_output_alias import HloInputOutputAliasConfig
from xla_teach.hlo.opcodes import REQUIRED, AttrKind, op_info
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.sharding import HloSharding

_ids = itertools.count()


class NameUniquer:
    """XLA's NameUniquer: ``prefix`` if free, else ``prefix.N`` with the next free N."""

    def __init__(self) -> None:
        self._used: dict[str, set[int]] = {}
        self._next: dict[str, int] = {}

    def get_unique_name(self, prefix: str) -> str:
        root = re.sub(r"[^a-zA-Z0-9_.\-]", "_", prefix or "name")
        if not re.match(r"[a-zA-Z_]", root):
            root = "_" + root
        suffix, has_suffix = 0, False
        dot = root.rfind(".")
        if 0 < dot < len(root) - 1 and root[dot + 1 :].isdigit():
            suffix, has_suffix = int(root[dot + 1 :]), True
            root = root[:dot]
        used = self._used.setdefault(root, set())
        if suffix in used:
            suffix = self._next.get(root, 0)
            while suffix in used:
                suffix += 1
            self._next[root] = suffix + 1
        used.add(suffix)
        if suffix == 0:
            return f"{root}.0" if has_suffix else root
        return f"{root}.{suffix}"


class HloInstruction:
    """One HLO operation. Create it, then add it to a computation with
    :meth:`HloComputation.add_instruction` (which gives it a unique name)."""

    def __init__(
        self,
        opcode: str,
        shape: Shape,
        operands: Sequence[HloInstruction] = (),
        attrs: dict[str, Any] | None = None,
        name: str = "",
    ) -> None:
        self.info = op_info(opcode)
        self.opcode = opcode
        self.shape = shape
        self.name = name
        self.unique_id = next(_ids)
        self.parent: HloComputation | None = None
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.metadata: OpMetadata | None = None
        self.frontend_attributes: dict[str, str] = {}
        self.backend_config: str = ""  # verbatim text after "backend_config=" ("" = none)
        self.sharding: HloSharding | None = None  # sharding={...} (hlo/sharding.py)
        self.raw_attrs: dict[str, str] = {}  # attributes xla_teach does not interpret
        self.control_predecessors: list[HloInstruction] = []
        self._operands: list[HloInstruction] = []
        self._users: list[HloInstruction] = []
        for op in operands:
            self._append_operand(op)

    # ---- graph links ----------------------------------------------------------------
    @property
    def operands(self) -> tuple[HloInstruction, ...]:
        return tuple(self._operands)

    def operand(self, i: int) -> HloInstruction:
        return self._operands[i]

    @property
    def operand_count(self) -> int:
        return len(self._operands)

    @property
    def users(self) -> tuple[HloInstruction, ...]:
        return tuple(self._users)

    def _append_operand(self, op: HloInstruction) -> None:
        self._operands.append(op)
        if self not in op._users:
            op._users.append(self)

    def replace_operand_with(self, index: int, new: HloInstruction) -> None:
        old = self._operands[index]
        self._operands[index] = new
        if old not in self._operands and self in old._users:
            old._users.remove(self)
        if self not in new._users:
            new._users.append(self)

    def replace_operands(self, old: HloInstruction, new: HloInstruction) -> None:
        """Every occurrence of ``old`` among the operands becomes ``new``."""
        for i, op in enumerate(self._operands):
            if op is old:
                self.replace_operand_with(i, new)

    def replace_all_uses_with(self, new: HloInstruction) -> None:
        """Make every user read ``new`` instead; ``new`` also becomes root if this was.

        Provenance follows the value: ``new`` -- and the instructions made for it that feed only
        it (the transposes around a canonicalized convolution, a simplifier's broadcast) -- take
        this instruction's metadata where they have none, as XLA's ``ReplaceInstruction`` gives a
        replacement its original's ``op_name`` and source line."""
        if new is self:
            return
        inherit_metadata(new, self)
        for user in list(self._users):
            if user is not new:
                user.replace_operands(self, new)
        comp = self.parent
        if comp is not None and comp.root_instruction is self:
            comp.root_instruction = new
            # A per-device program's ROOT says how its results are split (run_global reads it):
            # what replaces the ROOT -- a fusion, a simplified value -- says it too.
            if new.sharding is None and self.sharding is not None and new.shape == self.shape:
                new.sharding = self.sharding

    def detach_operands(self) -> None:
        """Drop all operand links (used when an instruction is removed)."""
        for op in set(self._operands):
            if self in op._users:
                op._users.remove(self)
        self._operands = []
        self.control_predecessors = []

    # ---- attributes -----------------------------------------------------------------
    def attr(self, name: str) -> Any:
        """The attribute's value, or the opcode table's default when it was not set."""
        if name in self.attrs:
            return self.attrs[name]
        spec = self.info.attr(name)
        if spec is None:
            raise KeyError(f"{self.opcode} has no attribute '{name}'")
        if spec.default is REQUIRED:
            raise KeyError(f"{self.name}: required attribute '{name}' is missing")
        return spec.default

    @property
    def dimensions(self) -> tuple[int, ...]:
        return tuple(self.attr("dimensions"))

    @property
    def literal(self) -> np.ndarray | tuple[Any, ...]:
        """A ``constant``'s value: an array, or for a tuple-shaped constant a tuple of them
        (see :func:`xla_teach.hlo.literal.literal_at` to reach one element)."""
        return self.attrs["literal"]

    @property
    def parameter_number(self) -> int:
        return int(self.attrs["parameter_number"])

    @property
    def tuple_index(self) -> int:
        return int(self.attrs["index"])

    @property
    def to_apply(self) -> HloComputation:
        return self.attrs["to_apply"]

    @property
    def fused_computation(self) -> HloComputation:
        return self.attrs["calls"]

    @property
    def fusion_kind(self) -> str:
        return str(self.attrs["kind"])

    def called_computations(self) -> list[HloComputation]:
        """Computations referenced by attributes, in attribute-table order."""
        called: list[HloComputation] = []
        for spec in self.info.attrs:
            value = self.attrs.get(spec.name)
            if value is None:
                continue
            if spec.kind is AttrKind.COMPUTATION:
                called.append(value)
            elif spec.kind is AttrKind.COMPUTATION_LIST:
                called.extend(value)
        return called

    def branch_computations(self) -> list[HloComputation]:
        """For ``conditional``: branches in index order (pred form: true, false)."""
        if self.attrs.get("branch_computations"):
            return list(self.attrs["branch_computations"])
        return [self.attrs["true_computation"], self.attrs["false_computation"]]

    # ---- copying --------------------------------------------------------------------
    def clone_with_new_operands(
        self, shape: Shape, operands: Sequence[HloInstruction], name: str | None = None
    ) -> HloInstruction:
        """A detached copy with the same opcode, attributes and metadata."""
        copy = HloInstruction(self.opcode, shape, operands, dict(self.attrs), self.name if name is None else name)
        copy.copy_side_info_from(self)
        return copy

    def copy_side_info_from(self, other: HloInstruction) -> None:
        """Copy metadata, frontend attributes, backend config, sharding and raw attributes."""
        self.metadata = OpMetadata(dict(other.metadata.fields)) if other.metadata else None
        self.frontend_attributes = dict(other.frontend_attributes)
        self.backend_config = other.backend_config
        self.sharding = other.sharding
        self.raw_attrs = dict(other.raw_attrs)

    # ---- misc -----------------------------------------------------------------------
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root_instruction is self

    def has_side_effect(self) -> bool:
        if self.info.side_effect:
            return True
        return self.opcode == "custom-call" and bool(self.attrs.get("custom_call_has_side_effect"))

    def to_text(self, **options: Any) -> str:
        from xla_teach.hlo.text.printer import instruction_to_text

        return instruction_to_text(self, **options)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<HloInstruction {self.to_text()}>"


class HloComputation:
    """A graph of instructions with numbered parameters and a root."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.root_instruction: HloInstruction | None = None
        self.parent: HloModule | None = None
        self.execution_thread: str = ""  # verbatim, printed after "}" when set

    # ---- building -------------------------------------------------------------------
    def add_instruction(self, instr: HloInstruction, name: str | None = None) -> HloInstruction:
        """Append ``instr`` (uniquely named if this computation is in a module)."""
        if instr.parent is not None:
            raise ValueError(f"{instr.name} already belongs to computation {instr.parent.name}")
        base = name if name is not None else (instr.name or instr.opcode)
        instr.name = self.parent.uniquer.get_unique_name(base) if self.parent else base
        instr.parent = self
        self.instructions.append(instr)
        return instr

    def add_parameter(self, shape: Shape, name: str = "") -> HloInstruction:
        number = len(self.parameter_instructions)
        return self.add_instruction(
            HloInstruction("parameter", shape, attrs={"parameter_number": number}), name or f"param_{number}"
        )

    def remove_instruction(self, instr: HloInstruction) -> None:
        if instr.users:
            names = ", ".join(u.name for u in instr.users)
            raise ValueError(f"cannot remove {instr.name}: still used by {names}")
        if instr is self.root_instruction:
            raise ValueError(f"cannot remove {instr.name}: it is the root of {self.name}")
        for other in self.instructions:
            if instr in other.control_predecessors:
                other.control_predecessors.remove(instr)
        instr.detach_operands()
        self.instructions.remove(instr)
        instr.parent = None

    def remove_instruction_and_unused_operands(self, instr: HloInstruction) -> None:
        """Remove ``instr`` and, recursively, the operands nothing else reads any more (XLA's
        ``RemoveInstructionAndUnusedOperands``). Parameters, the root, instructions with side
        effects and instructions that order others (control dependencies) are kept."""
        ordering = {p.unique_id for i in self.instructions for p in i.control_predecessors}
        stack = [instr]
        while stack:
            cur = stack.pop()
            if (cur.parent is not self or cur.users or cur.is_root() or cur.opcode == "parameter"
                    or cur.has_side_effect() or cur.unique_id in ordering or cur.control_predecessors):
                continue
            operands = list(dict.fromkeys(cur.operands))
            self.remove_instruction(cur)
            stack.extend(operands)

    def replace_instruction(self, old: HloInstruction, new: HloInstruction) -> HloInstruction:
        """Make every user of ``old`` (and the root slot) read ``new``, then remove ``old`` with
        the operands that became unused, as XLA's ``ReplaceInstruction`` does: a rewrite such as
        ``reshape(reshape(x)) -> reshape(x)`` leaves nothing behind for ``dce``.

        The two must have compatible shapes (the same type and dimensions). ``new`` is added to
        the computation when it is in none. Layouts are physical, so the replacement keeps
        ``old``'s: a fresh ``new`` takes it; an existing one with another layout is read through
        a ``copy`` (what XLA's layout assignment would insert). Returns what replaced ``old``:
        ``new`` or that copy."""
        if not old.shape.compatible(new.shape):
            raise ValueError(f"cannot replace {old.name} ({old.shape}) by {new.name} ({new.shape}): shapes differ")
        if new.parent is None:
            self.add_instruction(new)
        elif new.parent is not self:
            raise ValueError(f"cannot replace {old.name} by {new.name}: it is in computation {new.parent.name}")
        if old.shape.is_array and new.shape != old.shape:
            if not new.users and not new.is_root() and new.opcode != "parameter":
                new.shape = old.shape  # fresh: it takes the layout
            else:
                new = self.add_instruction(HloInstruction("copy", old.shape, [new]))
        old.replace_all_uses_with(new)
        if old.opcode != "parameter":
            self.remove_instruction_and_unused_operands(old)
        return new

    # ---- queries --------------------------------------------------------------------
    @property
    def parameter_instructions(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.parameter_number)

    def parameter(self, number: int) -> HloInstruction:
        for instr in self.instructions:
            if instr.opcode == "parameter" and instr.parameter_number == number:
                return instr
        raise IndexError(f"{self.name} has no parameter {number}")

    @property
    def num_parameters(self) -> int:
        return sum(1 for i in self.instructions if i.opcode == "parameter")

    @property
    def root(self) -> HloInstruction:
        if self.root_instruction is None:
            raise ValueError(f"computation {self.name} has no root")
        return self.root_instruction

    def instruction(self, name: str) -> HloInstruction:
        for instr in self.instructions:
            if instr.name == name or instr.name == name.lstrip("%"):
                return instr
        raise KeyError(f"no instruction named '{name}' in {self.name}")

    def post_order(self) -> list[HloInstruction]:
        """Operands before users, as XLA's MakeInstructionPostOrder: a DFS from every
        instruction without users, in list order, visiting operands in order.

        A cycle (through operands or ``control-predecessors``) has no post-order: it raises
        :class:`VerificationError` naming an instruction on it."""
        order: list[HloInstruction] = []
        visited: set[int] = set()
        on_path: set[int] = set()  # on the DFS path, operands not finished: reaching one again is a cycle
        for start in self.instructions:
            if start._users or start.unique_id in visited:
                continue
            on_path.add(start.unique_id)
            # each frame: an instruction and what is left of its operands (then control predecessors)
            stack = [(start, iter(start._operands + start.control_predecessors))]
            while stack:
                node, preds = stack[-1]
                for pred in preds:
                    uid = pred.unique_id
                    if uid in visited:
                        continue
                    if uid in on_path:
                        from xla_teach.hlo.errors import VerificationError

                        raise VerificationError(f"{self.name}: the graph has a cycle through %{pred.name} "
                                                "(via operands or control-predecessors)")
                    on_path.add(uid)
                    stack.append((pred, iter(pred._operands + pred.control_predecessors)))
                    break
                else:
                    stack.pop()
                    on_path.discard(node.unique_id)
                    visited.add(node.unique_id)
                    order.append(node)
        return order

    def called_computations(self) -> list[HloComputation]:
        seen: dict[int, HloComputation] = {}
        for instr in self.instructions:
            for comp in instr.called_computations():
                seen.setdefault(id(comp), comp)
        return list(seen.values())

    def to_text(self, **options: Any) -> str:
        from xla_teach.hlo.text.printer import computation_to_text

        return computation_to_text(self, **options)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


class HloModule:
    """A compilation unit: computations, one of them the ENTRY."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.computations: list[HloComputation] = []
        self.entry_computation: HloComputation | None = None
        self.uniquer = NameUniquer()  # instruction names
        self.computation_uniquer = NameUniquer()
        self.is_scheduled = False
        # Which outputs live in which (donated) parameters' buffers; see input_output_alias.py.
        self._input_output_alias = HloInputOutputAliasConfig()
        # The caller-visible layouts (parameter shapes, result shape); None = derived from ENTRY.
        self.entry_computation_layout: tuple[tuple[Shape, ...], Shape] | None = None
        self.header_attributes: dict[str, str] = {}  # other header attributes, verbatim
        self.stack_frame_tables: list[tuple[str, list[str]]] = []  # FileNames ... StackFrames
        self.unique_id = next(_ids)
        # While a pass pipeline runs: the module's text as the last pass left it, and each
        # computation's part of that text by name (passes/pass_base.py).
        self.pass_text: tuple[str, dict[str, str]] | None = None

    @property
    def input_output_alias(self) -> HloInputOutputAliasConfig:
        """The ``input_output_alias={...}`` header (empty: no output reuses a parameter)."""
        return self._input_output_alias

    @input_output_alias.setter
    def input_output_alias(self, value: HloInputOutputAliasConfig | str) -> None:
        """Set from a config (copied) or from its text (``"{ {0}: (0, {}, may-alias) }"``; ``""``: none)."""
        if isinstance(value, str):
            text = value.strip()
            value = HloInputOutputAliasConfig.parse(text) if text else HloInputOutputAliasConfig()
        self._input_output_alias = value.copy()

    # ---- building -------------------------------------------------------------------
    def add_computation(self, comp: HloComputation, is_entry: bool = False,
                        uniquify: bool = True) -> HloComputation:
        """Adopt ``comp``: give it and its instructions module-unique names."""
        if comp.parent is not None:
            raise ValueError(f"computation {comp.name} already belongs to module {comp.parent.name}")
        comp.parent = self
        if uniquify:
            comp.name = self.computation_uniquer.get_unique_name(comp.name)
            for instr in comp.instructions:
                instr.name = self.uniquer.get_unique_name(instr.name or instr.opcode)
        self.computations.append(comp)
        if is_entry:
            self.entry_computation = comp
        return comp

    def remove_computation(self, comp: HloComputation) -> None:
        if comp is self.entry_computation:
            raise ValueError("cannot remove the entry computation")
        self.computations.remove(comp)
        comp.parent = None

    # ---- queries --------------------------------------------------------------------
    @property
    def entry(self) -> HloComputation:
        if self.entry_computation is None:
            raise ValueError(f"module {self.name} has no ENTRY computation")
        return self.entry_computation

    def computation(self, name: str) -> HloComputation:
        for comp in self.computations:
            if comp.name == name or comp.name == name.lstrip("%"):
                return comp
        raise KeyError(f"no computation named '{name}' in module {self.name}")

    def computation_post_order(self) -> list[HloComputation]:
        """Callees before callers, entry last (the order the printer uses)."""
        order: list[HloComputation] = []
        visited: set[int] = set()

        def visit(comp: HloComputation) -> None:
            if id(comp) in visited:
                return
            visited.add(id(comp))
            for callee in comp.called_computations():
                visit(callee)
            order.append(comp)

        for comp in self.computations:
            if comp is not self.entry_computation:
                visit(comp)
        if self.entry_computation is not None:
            visit(self.entry_computation)
        return order

    def instructions(self) -> Iterable[HloInstruction]:
        for comp in self.computations:
            yield from comp.instructions

    def device_count(self) -> int:
        """How many devices the header asks for: ``num_partitions`` x ``num_replicas``."""
        header = self.header_attributes
        return int(header.get("num_partitions", "1")) * int(header.get("num_replicas", "1"))

    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations)

    def clone(self, name: str | None = None) -> HloModule:
        """A deep copy that prints identically (names kept)."""
        from xla_teach.hlo.cloning import clone_module

        return clone_module(self, name)

    def to_text(self, **options: Any) -> str:
        """The module in XLA's HLO text format (see :mod:`xla_teach.hlo.text.printer`)."""
        from xla_teach.hlo.text.printer import module_to_text

        return module_to_text(self, **options)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"


def inherit_metadata(new: HloInstruction, old: HloInstruction) -> None:
    """Give ``new``, and the operands made only for it, ``old``'s metadata where they have none."""
    if old.metadata is None or not old.metadata.fields:
        return
    stack, seen = [new], set()
    while stack:
        instr = stack.pop()
        if instr.unique_id in seen or instr.opcode == "parameter" or (instr.metadata and instr.metadata.fields):
            continue
        seen.add(instr.unique_id)
        instr.metadata = OpMetadata(dict(old.metadata.fields))
        # An operand made for this replacement feeds nothing else (it may not be in a computation yet).
        stack.extend(op for op in instr.operands if all(u.unique_id in seen for u in op.users))
