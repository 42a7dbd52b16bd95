"""Building ``fusion`` instructions: wrap a consumer, pull producers in, add outputs.

A fusion instruction is a call of a *fused computation* whose parameters are
the fusion's operands. Fusing producer ``P`` into fusion ``F`` clones ``P`` into
the fused computation, where it replaces the parameter that used to bring
``P``'s value in; ``P``'s own operands become operands of ``F`` (reusing a
parameter when ``F`` already reads that value). If nothing else reads ``P``, it
is removed from the outer computation; otherwise it is *duplicated*.

    %fusion = f32[4] fusion(%x, %mul), kind=kLoop, calls=%fused   # before
    %fusion = f32[4] fusion(%x, %y, %z), kind=kLoop, calls=%fused # after fusing %mul

Names follow XLA's CPU/GPU pipelines: the fusion is called
``<producer>_<consumer>_fusion`` after the first pair fused (``multiply_add_fusion``),
its computation ``fused_computation``, and its parameters ``param_N``.
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.hlo.shape import Shape
from xla_teach.passes.rewrite_utils import add_callee


def create_fusion(consumer: HloInstruction, kind: str, name: str | None = None) -> HloInstruction:
    """Replace ``consumer`` by a fusion instruction that computes exactly it."""
    comp = consumer.parent
    assert comp is not None and comp.parent is not None
    fused = HloComputation("fused_computation")
    params = []
    for i, op in enumerate(consumer.operands):
        param = HloInstruction("parameter", op.shape, attrs={"parameter_number": i}, name=f"param_{i}")
        params.append(param)
        fused.instructions.append(param)
        param.parent = fused
    clone = consumer.clone_with_new_operands(consumer.shape, params)
    fused.instructions.append(clone)
    clone.parent = fused
    fused.root_instruction = clone
    add_callee(comp, fused)
    fusion = HloInstruction("fusion", consumer.shape, consumer.operands, {"kind": kind, "calls": fused},
                            name=name or f"{consumer.opcode}_fusion")
    fusion.metadata = consumer.metadata
    comp.add_instruction(fusion)
    _move_next_to(comp, fusion, consumer)
    comp.replace_instruction(consumer, fusion)
    return fusion


def _move_next_to(comp: HloComputation, instr: HloInstruction, anchor: HloInstruction) -> None:
    comp.instructions.remove(instr)
    comp.instructions.insert(comp.instructions.index(anchor), instr)


def _operand_parameter(fusion: HloInstruction, value: HloInstruction) -> HloInstruction:
    """The fused parameter carrying ``value``, adding an operand+parameter if needed."""
    fused = fusion.fused_computation
    for i, op in enumerate(fusion.operands):
        if op is value:
            return fused.parameter(i)
    number = fusion.operand_count
    fusion._append_operand(value)
    param = HloInstruction("parameter", value.shape, attrs={"parameter_number": number})
    fused.add_instruction(param, f"param_{number}")
    fused.instructions.remove(param)
    fused.instructions.insert(number, param)
    return param


def _remove_operand(fusion: HloInstruction, index: int) -> None:
    """Drop operand ``index`` and its (now unused) parameter; renumber the later ones."""
    fused = fusion.fused_computation
    param = fused.parameter(index)
    assert not param.users, f"parameter {param.name} of {fused.name} is still used"
    fused.instructions.remove(param)
    param.parent = None
    removed = fusion._operands.pop(index)
    if removed not in fusion._operands and fusion in removed._users:
        removed._users.remove(fusion)
    for p in fused.instructions:
        if p.opcode == "parameter" and p.parameter_number > index:
            p.attrs["parameter_number"] -= 1


def fuse_producer(fusion: HloInstruction, producer: HloInstruction, keep_producer: bool = False) -> HloInstruction:
    """Clone ``producer`` into ``fusion``; remove it outside when nothing else reads it
    (unless ``keep_producer``). Returns the clone inside the fused computation.
    """
    assert fusion.opcode == "fusion"
    fused = fusion.fused_computation
    comp = fusion.parent
    assert comp is not None
    if producer.opcode == "fusion":
        return _merge_fusion(fusion, producer, keep_producer)
    new_operands = [_operand_parameter(fusion, op) for op in producer.operands]
    clone = producer.clone_with_new_operands(producer.shape, new_operands)
    fused.add_instruction(clone)
    for i in reversed(range(fusion.operand_count)):
        if fusion.operand(i) is producer:
            fused.parameter(i).replace_all_uses_with(clone)
            _remove_operand(fusion, i)
    # The clone reads parameters only, and what read the parameter it replaces comes after the
    # parameters: right after them, the instructions stay in an order where operands come first
    # (sorting the whole body after every fused producer made fusing n producers cost n^2).
    fused.instructions.remove(clone)
    fused.instructions.insert(len(fused.parameter_instructions), clone)
    if not keep_producer and not producer.users and not producer.is_root():
        comp.remove_instruction(producer)
    return clone


def _merge_fusion(fusion: HloInstruction, producer: HloInstruction, keep_producer: bool) -> HloInstruction:
    """Fuse a whole fusion ``producer`` (inline its fused computation)."""
    inner = producer.fused_computation
    fused = fusion.fused_computation
    mapping: dict[int, HloInstruction] = {}
    for p in inner.parameter_instructions:
        mapping[p.unique_id] = _operand_parameter(fusion, producer.operand(p.parameter_number))
    for instr in inner.post_order():
        if instr.opcode == "parameter":
            continue
        clone = instr.clone_with_new_operands(instr.shape, [mapping[o.unique_id] for o in instr.operands])
        fused.add_instruction(clone)
        mapping[instr.unique_id] = clone
    root = mapping[inner.root.unique_id]
    for i in reversed(range(fusion.operand_count)):
        if fusion.operand(i) is producer:
            fused.parameter(i).replace_all_uses_with(root)
            _remove_operand(fusion, i)
    _reorder_fused(fused)
    comp = fusion.parent
    if comp is not None and not keep_producer and not producer.users and not producer.is_root():
        comp.remove_instruction(producer)
        module = comp.parent
        if module is not None and inner in module.computations:
            module.remove_computation(inner)
    return root


def add_fusion_output(fusion: HloInstruction, producer: HloInstruction) -> HloInstruction:
    """Producer–consumer multi-output fusion: fuse ``producer`` and also return its value.

    Its remaining outside users then read ``get-tuple-element(fusion)``.
    """
    outside_users = [u for u in producer.users if u is not fusion]
    clone = fuse_producer(fusion, producer, keep_producer=True)
    return _expose_as_output(fusion, clone, outside_users, producer)


def _expose_as_output(fusion: HloInstruction, value: HloInstruction, outside_users: list[HloInstruction],
                      replaced: HloInstruction) -> HloInstruction:
    fused = fusion.fused_computation
    comp = fusion.parent
    assert comp is not None
    old_root = fused.root
    if old_root.opcode == "tuple" and fusion.shape.is_tuple:
        elements = list(old_root.operands)
    else:
        elements = [old_root]
    first_output = len(elements) == 1 and not fusion.shape.is_tuple
    elements.append(value)
    new_root = HloInstruction("tuple", Shape.make_tuple([e.shape for e in elements]), elements)
    fused.add_instruction(new_root)
    fused.root_instruction = new_root
    if old_root.opcode == "tuple" and not first_output and not old_root.users:
        fused.remove_instruction(old_root)
    old_shape = fusion.shape
    fusion.shape = new_root.shape
    if first_output:
        # Former users of the single-output fusion now read element 0.
        gte0 = HloInstruction("get-tuple-element", old_shape, [fusion], {"index": 0})
        for user in list(fusion.users):
            if user is not gte0:
                user.replace_operands(fusion, gte0)
        comp.add_instruction(gte0)
        _move_after(comp, gte0, fusion)
        if comp.root_instruction is fusion:
            comp.root_instruction = gte0
    index = len(elements) - 1
    gte = HloInstruction("get-tuple-element", value.shape, [fusion], {"index": index})
    comp.add_instruction(gte)
    _move_after(comp, gte, fusion)
    for user in outside_users:
        user.replace_operands(replaced, gte)
    if comp.root_instruction is replaced:
        comp.root_instruction = gte
    if not replaced.users and not replaced.is_root() and replaced.parent is comp:
        comp.remove_instruction(replaced)
    return gte


def _move_after(comp: HloComputation, instr: HloInstruction, anchor: HloInstruction) -> None:
    comp.instructions.remove(instr)
    comp.instructions.insert(comp.instructions.index(anchor) + 1, instr)


def _reorder_fused(fused: HloComputation) -> None:
    """Parameters first (by number), then the rest in post-order: a tidy printout."""
    params = fused.parameter_instructions
    rest = [i for i in fused.post_order() if i.opcode != "parameter"]
    fused.instructions = params + rest


def merge_sibling_fusions(a: HloInstruction, b: HloInstruction) -> HloInstruction:
    """Replace single-output fusions ``a`` and ``b`` by one fusion returning ``(a, b)``."""
    comp = a.parent
    assert comp is not None and comp is b.parent and comp.parent is not None
    module = comp.parent
    operands: list[HloInstruction] = list(dict.fromkeys(list(a.operands) + list(b.operands)))
    fused = HloComputation("fused_computation")
    params = []
    for i, op in enumerate(operands):
        param = HloInstruction("parameter", op.shape, attrs={"parameter_number": i}, name=f"param_{i}")
        param.parent = fused
        fused.instructions.append(param)
        params.append(param)
    roots = []
    for source in (a, b):
        mapping = {p.unique_id: params[operands.index(source.operand(p.parameter_number))]
                   for p in source.fused_computation.parameter_instructions}
        for instr in source.fused_computation.post_order():
            if instr.opcode == "parameter":
                continue
            clone = instr.clone_with_new_operands(instr.shape, [mapping[o.unique_id] for o in instr.operands])
            clone.parent = fused
            fused.instructions.append(clone)
            mapping[instr.unique_id] = clone
        roots.append(mapping[source.fused_computation.root.unique_id])
    root = HloInstruction("tuple", Shape.make_tuple([r.shape for r in roots]), roots)
    root.parent = fused
    fused.instructions.append(root)
    fused.root_instruction = root
    add_callee(comp, fused)
    kind = "kInput" if "kInput" in (a.fusion_kind, b.fusion_kind) else "kLoop"
    merged = HloInstruction("fusion", root.shape, operands, {"kind": kind, "calls": fused},
                            name=f"{a.name.split('_fusion')[0].split('.')[0]}_{b.name.split('_fusion')[0].split('.')[0]}"
                                 f"_fusion")
    merged.metadata = a.metadata
    comp.add_instruction(merged)
    _move_next_to(comp, merged, a if comp.instructions.index(a) > comp.instructions.index(b) else b)
    for k, source in enumerate((a, b)):
        gte = HloInstruction("get-tuple-element", source.shape, [merged], {"index": k})
        comp.add_instruction(gte)
        _move_after(comp, gte, merged)
        source.replace_all_uses_with(gte)
        comp.remove_instruction(source)
        module.remove_computation(source.fused_computation)
    return merged
