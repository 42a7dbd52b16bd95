"""The HLO verifier: is this module well formed?

The parser builds whatever the text says, and passes rewrite graphs; the verifier
(XLA's ``HloVerifier``) is the safety net run after both. It checks

* **module structure**: an ENTRY that belongs to the module, unique computation and
  instruction names, called computations that belong to the module, no recursion, and an
  ``input_output_alias`` whose entries pair existing parameter and result leaves of equal shape;
* **computation structure**: a root, parameters numbered ``0..n-1`` without gaps,
  operands (and control predecessors) from the same computation, consistent
  operand/user links, no cycles;
* **each instruction**: operand count (the opcode table's arity), required
  attributes present with the right Python types, and -- the main check -- that the
  declared shape is compatible (layouts ignored) with the shape
  :func:`~xla_teach.hlo.shape_inference.infer_shape` infers. Shape inference also
  checks the details: compare directions, fusion kinds, tuple indices, constant
  literals, and the signatures of called computations (reducers, loop bodies and
  conditions, call and fusion arguments, branches).

All problems are collected; :class:`~xla_teach.hlo.errors.VerificationError`
reports the first few, the first one found first::

    module 'm' failed verification (1 problem):
      - %main: pad %pad.1: declared f32[6,17] but inferred f32[6,16] from operands f32[4,8], f32[]
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Mapping

import numpy as np

from xla_teach.hlo.attributes import ConvDimensionNumbers, PaddingDim, SliceDim, Window
from xla_teach.hlo.entry_layout import entry_layout_problems
from xla_teach.hlo.errors import ShapeError, VerificationError, shape_text, shapes_text
from xla_teach.hlo.input_output_alias import shape_index_text
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import AttrKind, op_info
from xla_teach.hlo.replica_groups import expand_replica_groups, replica_groups_syntax_ok
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference import infer_shape

MAX_REPORTED = 5  # problems shown in the error message (all are in ``VerificationError.problems``)

# Keys of ``HloInstruction.attrs`` that are not in the opcode table.
_SPECIAL_ATTRS = {"parameter": {"parameter_number"}, "constant": {"literal", "literal_elided"}}


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------
def verify_module(module: HloModule, only: Mapping[str, Collection[str] | None] | None = None) -> None:
    """Raise :class:`VerificationError` if ``module`` has any problem. With ``only`` (computation
    name -> instruction names, or None for all), just those computations are checked, and in each
    the structure and the instructions named; the module's own structure always is. A pass
    pipeline passes what a pass changed and what reads it."""
    _raise_if_any(f"module '{module.name}'", module_problems(module, only))


def verify_computation(comp: HloComputation) -> None:
    """Raise :class:`VerificationError` if ``comp`` (on its own) has any problem."""
    _raise_if_any(f"computation '{comp.name}'", computation_problems(comp))


def module_problems(module: HloModule, only: Mapping[str, Collection[str] | None] | None = None) -> list[str]:
    """Every problem found in ``module``, one line each (empty when it is fine); with ``only``,
    in those computations and instructions alone (see :func:`verify_module`)."""
    problems = _module_structure_problems(module)
    for comp in module.computations:
        if only is None:
            problems += computation_problems(comp, check_names=False)
        elif comp.name in only:
            problems += computation_problems(comp, check_names=False, instructions=only[comp.name])
    if module.device_count() > 1:  # the header says how many devices: collectives must name them right
        for comp in module.computations:
            for instr in comp.instructions:
                problems += [f"%{comp.name}: {instr.opcode} %{instr.name}: {p}"
                             for p in device_problems(instr, module.device_count())]
    return problems


def device_problems(instr: HloInstruction, devices: int) -> list[str]:
    """What XLA's verifier rejects in a program for ``devices`` devices: replica groups that do not
    cover the devices once each, a collective whose result shape does not follow from its group
    size (all-gather, reduce-scatter, all-to-all), and a collective-permute whose pairs send from,
    or to, one device twice or name a device that does not exist."""
    problems = []
    groups = instr.attrs.get("replica_groups")
    # (``{}`` is every device of the collective's mode, replicas or partitions: left to the runtime)
    if isinstance(groups, str) and replica_groups_syntax_ok(groups) and groups.replace(" ", "") != "{}":
        try:
            expanded = expand_replica_groups(groups, devices)
        except ValueError as err:
            problems.append(str(err))
        else:
            problems += _group_size_problems(instr, expanded)
    pairs = instr.attrs.get("source_target_pairs")
    if isinstance(pairs, str) and _SOURCE_TARGET_PAIRS.fullmatch(pairs.replace(" ", "")):
        found = [tuple(map(int, m)) for m in re.findall(r"\{(\d+),(\d+)\}", pairs)]
        outside = sorted({d for pair in found for d in pair if d >= devices})
        if outside:
            problems.append(f"source_target_pairs={pairs} names device(s) {outside}, but the module runs on {devices}")
        for side, k in (("sends from", 0), ("sends to", 1)):
            ids = [pair[k] for pair in found]
            twice = sorted({d for d in ids if ids.count(d) > 1})
            if twice:
                problems.append(f"source_target_pairs={pairs} {side} device(s) {twice} more than once")
    return problems


def _group_size_problems(instr: HloInstruction, groups: list[list[int]]) -> list[str]:
    """An all-gather's result is its operand times the group size along its dimension, a
    reduce-scatter's operand its result times the group size, and an all-to-all splits its
    dimension (or its operands) into one piece per member: so their groups must be of one size."""
    kind = instr.opcode
    if kind not in ("all-gather", "reduce-scatter", "all-to-all") or not groups:
        return []
    sizes = sorted({len(g) for g in groups})
    if len(sizes) > 1:
        return [f"{kind} needs replica groups of one size; these have {sizes} members"]
    n, dims = sizes[0], instr.attrs.get("dimensions")
    operand, result = instr.operands[0].shape if instr.operands else None, instr.shape
    if kind == "all-to-all" and len(instr.operands) > 1:
        return [] if len(instr.operands) == n else [f"all-to-all of {len(instr.operands)} operands (one per member) "
                                                    f"in groups of {n}"]
    if operand is None or not operand.is_array or not result.is_array or not dims:
        return []
    d = dims[0]
    if not 0 <= d < min(operand.rank, result.rank):
        return []  # shape inference reports it
    have, want = {"all-gather": (result.dimensions[d], operand.dimensions[d] * n),
                  "reduce-scatter": (operand.dimensions[d], result.dimensions[d] * n),
                  "all-to-all": (operand.dimensions[d] % n, 0)}[kind]
    if have == want:
        return []
    if kind == "all-to-all":
        return [f"all-to-all splits dimension {d} ({operand.dimensions[d]}) into {n} pieces: it does not divide"]
    what = "result" if kind == "all-gather" else "operand"
    return [f"{kind} over groups of {n}: its {what}'s dimension {d} should be {want}, not {have} "
            f"({shape_text(operand)} -> {shape_text(result)})"]


def computation_problems(comp: HloComputation, check_names: bool = True,
                         instructions: Collection[str] | None = None) -> list[str]:
    """Every problem found in ``comp``; ``check_names`` also checks name uniqueness
    inside it (the module check does this module-wide); ``instructions``: check only the
    instructions of these names (the structure is always checked)."""
    where = f"%{comp.name}"
    problems = [f"{where}: {p}" for p in _computation_structure_problems(comp)]
    if check_names:
        problems += [f"{where}: {p}" for p in _duplicates(i.name for i in comp.instructions)]
    for instr in comp.instructions:
        if instructions is None or instr.name in instructions:
            problems += [f"{where}: {instr.opcode} %{instr.name}: {p}" for p in instruction_problems(instr)]
    return problems


def _raise_if_any(what: str, problems: list[str]) -> None:
    if not problems:
        return
    lines = [f"{what} failed verification ({len(problems)} problem{'s' if len(problems) > 1 else ''}):"]
    lines += [f"  - {p}" for p in problems[:MAX_REPORTED]]
    if len(problems) > MAX_REPORTED:
        lines.append(f"  ... and {len(problems) - MAX_REPORTED} more")
    raise VerificationError("\n".join(lines), problems)


# ---------------------------------------------------------------------------------------
# Module and computation structure
# ---------------------------------------------------------------------------------------
def _duplicates(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    repeated: list[str] = []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    return [f"the name '{name}' is used more than once" for name in repeated]


def _module_structure_problems(module: HloModule) -> list[str]:
    problems: list[str] = []
    if module.entry_computation is None:
        problems.append("the module has no ENTRY computation")
    elif module.entry_computation not in module.computations:
        problems.append(f"the ENTRY computation %{module.entry_computation.name} is not in the module")
    problems += [f"computation names: {p}" for p in _duplicates(c.name for c in module.computations)]
    problems += [f"instruction names: {p}" for p in _duplicates(i.name for i in module.instructions())]
    for comp in module.computations:
        if comp.parent is not module:
            problems.append(f"%{comp.name}: its parent is not this module")
        for instr in comp.instructions:
            for callee in instr.called_computations():
                if not isinstance(callee, HloComputation) or callee not in module.computations:
                    problems.append(f"%{comp.name}: %{instr.name} calls %{getattr(callee, 'name', callee)}, "
                                    "which is not a computation of this module")
    cycle = _call_cycle(module)
    if cycle:
        problems.append("computations call each other recursively: " + " -> ".join(f"%{c}" for c in cycle))
    return problems + entry_layout_problems(module) + input_output_alias_problems(module)


def _subshape(shape: Shape, index: tuple[int, ...]) -> Shape | None:
    """The shape at ``index`` inside ``shape``, or None when the index does not exist."""
    for i in index:
        if not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def input_output_alias_problems(module: HloModule) -> list[str]:
    """``input_output_alias``: every entry names an existing parameter leaf and result leaf
    of equal shape (layout included: the output is written in the parameter's bytes), and
    no parameter leaf is the home of two outputs."""
    config = module.input_output_alias
    entry = module.entry_computation
    if not config or entry is None or entry.root_instruction is None:
        return []
    problems: list[str] = []
    params = {p.parameter_number: p for p in entry.parameter_instructions}
    homes: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
    for out_index, alias in config.items():
        what = f"input_output_alias {shape_index_text(out_index)}: {alias.to_text()}"
        out_shape = _subshape(entry.root.shape, out_index)
        if out_shape is None:
            problems.append(f"{what}: the ENTRY result {shape_text(entry.root.shape)} has no output "
                            f"{shape_index_text(out_index)}")
            continue
        param = params.get(alias.parameter_number)
        if param is None:
            problems.append(f"{what}: ENTRY %{entry.name} has no parameter {alias.parameter_number} "
                            f"(it has {len(params)})")
            continue
        param_shape = _subshape(param.shape, alias.parameter_index)
        if param_shape is None:
            problems.append(f"{what}: parameter {alias.parameter_number} %{param.name} of shape "
                            f"{shape_text(param.shape)} has no index {shape_index_text(alias.parameter_index)}")
            continue
        if out_shape.is_tuple or not out_shape.is_array:
            problems.append(f"{what}: only arrays can alias, but output {shape_index_text(out_index)} is "
                            f"{shape_text(out_shape)}")
        elif not out_shape.compatible(param_shape) or out_shape.minor_to_major() != param_shape.minor_to_major():
            problems.append(f"{what}: output {shape_index_text(out_index)} is {out_shape.to_text()} but parameter "
                            f"{alias.parameter_number} %{param.name}{shape_index_text(alias.parameter_index)} is "
                            f"{param_shape.to_text()}; aliased shapes must be equal")
        home = (alias.parameter_number, alias.parameter_index)
        if home in homes:
            problems.append(f"{what}: parameter {alias.parameter_number} {shape_index_text(alias.parameter_index)} "
                            f"already holds output {shape_index_text(homes[home])}")
        homes.setdefault(home, out_index)
    return problems


def _call_cycle(module: HloModule) -> list[str]:
    """Names along a call cycle (``[a, b, a]``), or ``[]`` when the call graph is acyclic."""
    state: dict[int, str] = {}  # id -> "active" | "done"

    def visit(comp: HloComputation, path: list[str]) -> list[str]:
        state[id(comp)] = "active"
        for callee in comp.called_computations():
            if not isinstance(callee, HloComputation):
                continue
            if state.get(id(callee)) == "active":
                return path + [comp.name, callee.name]
            if id(callee) not in state:
                found = visit(callee, path + [comp.name])
                if found:
                    return found
        state[id(comp)] = "done"
        return []

    for comp in module.computations:
        if id(comp) not in state:
            found = visit(comp, [])
            if found:
                start = found.index(found[-1])
                return found[start:]
    return []


def _computation_structure_problems(comp: HloComputation) -> list[str]:
    problems: list[str] = []
    members = {id(i) for i in comp.instructions}
    if comp.root_instruction is None:
        problems.append("the computation has no root")
    elif id(comp.root_instruction) not in members:
        problems.append(f"the root %{comp.root_instruction.name} is not an instruction of this computation")
    numbers = sorted(i.attrs.get("parameter_number", -1) for i in comp.instructions if i.opcode == "parameter")
    if numbers != list(range(len(numbers))):
        problems.append(f"parameters must be numbered 0..{len(numbers) - 1} without gaps or repeats, got {numbers}")
    for instr in comp.instructions:
        if instr.parent is not comp:
            problems.append(f"%{instr.name} is listed here but its parent is another computation")
        for i, op in enumerate(instr.operands):
            if id(op) not in members:
                owner = op.parent.name if op.parent is not None else "no computation"
                problems.append(f"operand {i} of %{instr.name}, %{op.name}, belongs to {owner}, not this computation")
            elif instr not in op.users:
                problems.append(f"%{op.name} is an operand of %{instr.name} but does not list it as a user")
        for pred in instr.control_predecessors:
            if id(pred) not in members:
                problems.append(f"control predecessor %{pred.name} of %{instr.name} is not in this computation")
    cycle = _instruction_cycle(comp)
    if cycle:
        problems.append("the graph has a cycle: " + " -> ".join(f"%{n}" for n in cycle))
    return problems


def _instruction_cycle(comp: HloComputation) -> list[str]:
    """Names along a dataflow/control cycle, or ``[]``. Iterative DFS (graphs can be deep); each
    node's predecessors are listed once, when the walk first reaches it."""
    state: dict[int, str] = {}
    for start in comp.instructions:
        if id(start) in state:
            continue
        stack: list[tuple[HloInstruction, list[HloInstruction], int]] = [(start, _predecessors(start), 0)]
        path: list[HloInstruction] = [start]
        state[id(start)] = "active"
        while stack:
            node, preds, next_index = stack[-1]
            if next_index == len(preds):
                stack.pop()
                path.pop()
                state[id(node)] = "done"
                continue
            stack[-1] = (node, preds, next_index + 1)
            pred = preds[next_index]
            seen = state.get(id(pred))
            if seen == "active":
                names = [n.name for n in path[path.index(pred):]] if pred in path else [node.name]
                return names + [pred.name]
            if seen is None:
                state[id(pred)] = "active"
                stack.append((pred, _predecessors(pred), 0))
                path.append(pred)
    return []


def _predecessors(instr: HloInstruction) -> list[HloInstruction]:
    return [*instr.operands, *instr.control_predecessors]


# ---------------------------------------------------------------------------------------
# Instructions
# ---------------------------------------------------------------------------------------
def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _tuple_of(value: object, item_type: type | tuple[type, ...]) -> bool:
    return isinstance(value, tuple) and all(isinstance(v, item_type) for v in value)


_ATTR_TYPE_CHECKS = {
    AttrKind.INT: (_is_int, "an int"),
    AttrKind.INT_LIST: (lambda v: isinstance(v, tuple) and all(_is_int(x) for x in v), "a tuple of ints"),
    AttrKind.BOOL: (lambda v: isinstance(v, bool), "a bool"),
    AttrKind.WORD: (lambda v: isinstance(v, str), "a str"),
    AttrKind.WORD_LIST: (lambda v: _tuple_of(v, str), "a tuple of str"),
    AttrKind.STRING: (lambda v: isinstance(v, str), "a str"),
    AttrKind.COMPUTATION: (lambda v: isinstance(v, HloComputation), "an HloComputation"),
    AttrKind.COMPUTATION_LIST: (lambda v: _tuple_of(v, HloComputation), "a tuple of HloComputation"),
    AttrKind.WINDOW: (lambda v: isinstance(v, Window), "a Window"),
    AttrKind.SLICE: (lambda v: _tuple_of(v, SliceDim), "a tuple of SliceDim"),
    AttrKind.PADDING: (lambda v: _tuple_of(v, PaddingDim), "a tuple of PaddingDim"),
    AttrKind.DIM_LABELS: (lambda v: isinstance(v, ConvDimensionNumbers), "a ConvDimensionNumbers"),
    AttrKind.RAW: (lambda v: isinstance(v, str), "a str"),
}


# replica_groups (any of XLA's forms: hlo/replica_groups.py) and source_target_pairs={{0,1},{1,0}}
# are kept verbatim, but they must at least read as groups.
_SOURCE_TARGET_PAIRS = re.compile(r"\{(\{\d+,\d+\}(,\{\d+,\d+\})*)?\}")

# XLA's PrecisionConfig values, as its printer writes them (operand_precision={default,highest}).
PRECISIONS = ("default", "high", "highest", "packed_nibble")

@functools.cache
def _known_attributes(opcode: str) -> frozenset[str]:
    """The attribute names an instruction of ``opcode`` may carry (the opcode table's, and the
    parser's extras), worked out once per opcode."""
    return frozenset(spec.name for spec in op_info(opcode).attrs) | _SPECIAL_ATTRS.get(opcode, frozenset())


def _attribute_problems(instr: HloInstruction) -> list[str]:
    problems: list[str] = []
    attrs = instr.attrs
    for spec in instr.info.attrs:
        value = attrs.get(spec.name)
        if value is None:
            if spec.required:
                problems.append(f"the required attribute '{spec.name}' is missing")
            continue
        check, wanted = _ATTR_TYPE_CHECKS[spec.kind]
        if not check(value):
            problems.append(f"attribute '{spec.name}' must be {wanted}, got {type(value).__name__} {value!r:.60}")
    known = _known_attributes(instr.opcode)
    for key in attrs:
        if key not in known and not key.startswith("_"):
            problems.append(f"unknown attribute '{key}' for {instr.opcode}")
    if instr.opcode == "parameter" and not _is_int(instr.attrs.get("parameter_number")):
        problems.append("a parameter needs an int 'parameter_number'")
    if instr.opcode == "constant" and not isinstance(instr.attrs.get("literal"), np.ndarray | tuple):
        problems.append("a constant needs a 'literal' (a NumPy array, or a tuple of them for a tuple shape)")
    groups = instr.attrs.get("replica_groups")
    if isinstance(groups, str) and not replica_groups_syntax_ok(groups):
        problems.append(f"replica_groups={groups} is not a list of groups like {{{{0,1}},{{2,3}}}}, [2,2]<=[4] or "
                        "mesh['x'=2,'y'=2] {'y'}")
    pairs = instr.attrs.get("source_target_pairs")
    if isinstance(pairs, str) and not _SOURCE_TARGET_PAIRS.fullmatch(pairs.replace(" ", "")):
        problems.append(f"source_target_pairs={pairs} is not a list of groups like {{{{0,1}},{{1,0}}}}")
    precision = instr.attrs.get("operand_precision")
    if precision:
        if len(precision) != instr.operand_count:
            problems.append(f"operand_precision has {len(precision)} entries for {instr.operand_count} operands")
        bad = [p for p in precision if str(p).lower() not in PRECISIONS]
        if bad:
            problems.append(f"unknown operand_precision {', '.join(map(str, bad))} (known: {', '.join(PRECISIONS)})")
    return problems


def _sharding_problems(instr: HloInstruction) -> list[str]:
    """A sharding must fit the value: one per leaf of a tuple, one tile dimension per array
    dimension (plus its subgroup dimensions)."""
    sharding = instr.sharding
    if sharding is None or sharding.kind in ("replicated", "manual", "unknown", "maximal"):
        return []
    leaves = instr.shape.leaf_shapes() if instr.shape.is_tuple else [instr.shape]
    if sharding.is_tuple:
        # XLA gives a tuple value one sharding per leaf; a custom-call may also give a tuple of one.
        if len(sharding.elements) not in (len(leaves), 1) and instr.shape.is_tuple:
            return [f"sharding {sharding} has {len(sharding.elements)} elements for {len(leaves)} tuple leaves"]
        pairs = list(zip(sharding.elements, leaves, strict=False)) if instr.shape.is_tuple else []
    else:
        pairs = [(sharding, leaf) for leaf in leaves if leaf.is_array]
    for element, leaf in pairs:
        if element.kind == "tiled" and leaf.is_array and element.data_rank != leaf.rank:
            return [f"sharding {element} splits {element.data_rank} dimension(s) of a rank-{leaf.rank} value"]
    return []


def instruction_problems(instr: HloInstruction) -> list[str]:
    """Problems of one instruction: arity, attributes, and declared vs inferred shape."""
    arity = instr.info.arity
    if arity is not None and instr.operand_count != arity:
        return [f"takes {arity} operand(s) but has {instr.operand_count}"]
    problems = _attribute_problems(instr) + _sharding_problems(instr)
    if problems:
        return problems  # inference would trip over the malformed attributes
    operand_shapes = [op.shape for op in instr.operands]
    try:
        inferred = infer_shape(instr.opcode, operand_shapes, instr.attrs, declared_shape=instr.shape)
    except ShapeError as err:
        return [err.explanation]
    if not inferred.compatible(instr.shape):
        return [f"declared {shape_text(instr.shape)} but inferred {shape_text(inferred)} "
                f"from operands {shapes_text(operand_shapes)}"]
    return []
