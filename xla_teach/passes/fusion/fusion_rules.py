"""The rules that decide whether a producer is fused into a consumer.

:func:`fusion_decision` returns ``None`` to fuse, or the reason not to -- the
reason appears in the pass's notes so a student can see why a candidate was
rejected. The rules mirror XLA's ``InstructionFusion`` / ``CpuInstructionFusion``:

* the consumer must be able to host a fusion (elementwise or data-movement ops,
  a reduction, or an existing fusion);
* the producer must be computable per output element (elementwise, broadcast,
  reshape, transpose, slice, pad, concatenate, reverse, iota, scalar constants,
  loop fusions) -- or a ``dot`` whose only user is an elementwise epilogue
  (output fusion);
* expensive producers (exp, divide, dot, ...) are never duplicated; cheap ones
  may be, when other users keep the original alive;
* fusing must not create a cycle (a path producer -> X -> consumer through an
  unfused X);
* fusions stay under a size limit (instructions and operands).
"""

from __future__ import annotations

from dataclasses import dataclass

from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import INDEX_MAPPED_OPCODES, is_elementwise
from xla_teach.hlo.shape import Shape

# Ops a loop fusion can compute element by element from its operands (besides elementwise ones).
_LOOP_FUSIBLE = INDEX_MAPPED_OPCODES
_CONSUMER_HOSTS = _LOOP_FUSIBLE | {"reduce", "fusion"}


@dataclass
class FusionConfig:
    """Knobs that differ between backends."""

    may_duplicate: bool = True
    max_instructions: int = 64
    max_operands: int = 32
    output_fusion: bool = True  # dot + elementwise epilogue -> kOutput
    max_fused_constant_elements: int = 1  # only scalar constants are fused
    # Ops this backend treats as cheap although the opcode table calls them expensive
    # (GPUs divide and take reciprocal square roots in one instruction).
    cheap_ops: frozenset[str] = frozenset()
    # Whether a column reduction (one that keeps the minor-most dimensions: summing a matrix's rows
    # into one row) may also write a loop's value as an extra output. The CPU's column-reduction
    # kernel walks memory row by row and has no side outputs; with one it would walk columns.
    column_reduction_side_outputs: bool = True
    # Whether a producer that a dot or convolution also reads (so it is written to memory anyway)
    # may still be recomputed inside its other consumers. The fusion_decision exercise's rules,
    # written before this one, say yes.
    recompute_values_kept_in_memory: bool = False


def keeps_minor_dimensions(shape: Shape, kept: list[int]) -> bool:
    """A reduction of ``shape`` that keeps ``kept`` is a *column* reduction: the kept dimensions
    are the minor-most in memory (summing a row-major matrix's rows into one row)."""
    return bool(kept) and set(shape.minor_to_major()[:len(kept)]) == set(kept)


def holds_reduction(fusion: HloInstruction) -> bool:
    """True for a fusion with a ``reduce`` inside. XLA's own optimized HLO wraps a lone reduce in a
    kLoop fusion (``wrapped_reduce``): it is still a reduction -- not an element loop a consumer can
    recompute per element, nor one whose loop can also write a consumer's value."""
    return fusion.opcode == "fusion" and any(i.opcode == "reduce" for i in fusion.fused_computation.instructions)


def _is_loop_fusible(instr: HloInstruction) -> bool:
    if is_elementwise(instr.opcode) or instr.opcode in _LOOP_FUSIBLE:
        return not instr.shape.is_tuple and instr.opcode not in ("rng",)
    return False


def _fusion_hero(fusion: HloInstruction) -> HloInstruction:
    """The instruction that shapes a fusion's loop: its root (or root's first tuple element)."""
    root = fusion.fused_computation.root
    if root.opcode == "tuple":
        root = root.operand(0)
    return root


def _fused_dot(fusion: HloInstruction) -> HloInstruction | None:
    for instr in fusion.fused_computation.instructions:
        if instr.opcode == "dot":
            return instr
    return None


def consumer_can_host(consumer: HloInstruction) -> str | None:
    if consumer.opcode == "fusion":
        if consumer.fused_computation.root.opcode == "tuple":
            return "multi-output fusions take no more producers"
        if consumer.fusion_kind not in ("kLoop", "kInput", "kOutput"):
            return f"{consumer.fusion_kind} fusions are backend-defined"
        return None
    if consumer.opcode == "reduce":
        return None
    if _is_loop_fusible(consumer):
        return None
    return f"{consumer.opcode} cannot host a fusion"


def _reads_elementwise(consumer: HloInstruction, producer: HloInstruction) -> bool:
    """True if ``consumer`` reads ``producer`` only at its own output index."""
    if consumer.opcode != "fusion":
        return is_elementwise(consumer.opcode) and consumer.shape.dimensions == producer.shape.dimensions
    for i, op in enumerate(consumer.operands):
        if op is not producer:
            continue
        # Every instruction on the way from the producer to the root must be elementwise over
        # the producer's dimensions (a transpose or broadcast further on changes the index).
        # (Each instruction is checked once: following every path would take exponential time
        # when values fan out and meet again, x * tanh(x) after x * tanh(x) ...)
        stack, seen = list(consumer.fused_computation.parameter(i).users), set()
        while stack:
            user = stack.pop()
            if user.unique_id in seen:
                continue
            seen.add(user.unique_id)
            if not is_elementwise(user.opcode) or user.shape.dimensions != producer.shape.dimensions:
                return False
            stack.extend(user.users)
    return True


def _producer_problem(producer: HloInstruction, consumer: HloInstruction, config: FusionConfig) -> str | None:
    op = producer.opcode
    if op == "parameter":
        return "parameters are inputs, not computations"
    if op == "constant":
        if producer.shape.element_count() > config.max_fused_constant_elements:
            return "only scalar constants are fused (large literals stay in memory)"
        return None
    if op == "dot":
        if not config.output_fusion:
            return "dot is not fused on this backend"
        if len(producer.users) != 1:
            return "a dot is fused only into its single user (output fusion)"
        if consumer.opcode == "fusion" and consumer.fusion_kind != "kLoop":
            return f"a dot is fused only into an elementwise epilogue, not a {consumer.fusion_kind} fusion"
        if consumer.opcode != "fusion" and not is_elementwise(consumer.opcode):
            return "a dot is fused only into an elementwise epilogue"
        if not _reads_elementwise(consumer, producer):
            return "the epilogue reads the dot at other indices (broadcast/transpose)"
        if consumer.shape.is_tuple or consumer.shape.element_type is not producer.shape.element_type:
            # The dot's sums are staged in the output buffer, which must hold the dot's type.
            result = "a tuple" if consumer.shape.is_tuple else consumer.shape.element_type.name.lower()
            return f"the epilogue changes the element type ({producer.shape.element_type.name.lower()} -> {result})"
        return None
    if op == "fusion":
        if producer.fusion_kind != "kLoop" or producer.shape.is_tuple:
            return f"only single-output kLoop fusions merge into consumers ({producer.fusion_kind})"
        if holds_reduction(producer):
            return f"{producer.name} holds a reduction, which is not recomputed per output element of its consumer"
        return None
    if op == "reduce":
        return "a reduction is not recomputed per output element of its consumer"
    if not _is_loop_fusible(producer):
        return f"{op} is not fusible (it needs its own kernel)"
    return None


def _kind_problem(producer: HloInstruction, consumer: HloInstruction) -> str | None:
    """Restrictions that come from the consumer's fusion kind."""
    if consumer.opcode == "fusion" and consumer.fusion_kind == "kOutput":
        dot = _fused_dot(consumer)
        for i, op in enumerate(consumer.operands):
            if op is producer and dot is not None and consumer.fused_computation.parameter(i) in dot.operands:
                return "dot operands stay in memory (the dot emitter/BLAS reads them)"
    if consumer.opcode == "reduce" or (consumer.opcode == "fusion" and consumer.fusion_kind == "kInput"):
        if producer.opcode == "dot":
            return "a dot is not fused into a reduction"
    return None


def _would_duplicate(producer: HloInstruction, consumer: HloInstruction, config: FusionConfig) -> str | None:
    others = [u for u in producer.users if u is not consumer]
    if not others:
        return None
    if not config.may_duplicate:
        return "producer has other users and duplication is off"
    if producer.opcode == "fusion" and is_cheap_fusion(producer):
        return None  # a broadcast constant (say) is recomputed in every consumer, as XLA does
    expensive = producer.info.expensive and producer.opcode not in config.cheap_ops
    if expensive or producer.opcode in ("fusion", "dot", "gather"):
        return f"{producer.opcode} is expensive and has other users (never duplicated)"
    kept = next((u for u in others if u.opcode in MATERIALIZING_USERS), None)
    if kept is not None and producer.opcode not in CHEAP_FUSED_OPS and not config.recompute_values_kept_in_memory:
        # The producer's result is written to memory anyway for that user: reading it back costs
        # this consumer one load per element, recomputing it one load per operand and the work.
        return (f"{producer.opcode} stays in memory for {kept.opcode} {kept.name}, which reads its operands from "
                "memory: recomputing it here would only add work")
    return None


# Users that read their operands from memory (BLAS, the convolution library): a producer of theirs
# is written out whatever else fuses it.
MATERIALIZING_USERS = frozenset({"dot", "convolution"})


CHEAP_FUSED_OPS = frozenset({"parameter", "constant", "broadcast", "iota", "reshape", "bitcast"})


def is_cheap_fusion(fusion: HloInstruction) -> bool:
    """A single-output kLoop fusion that only *moves* or *creates* values (a broadcast scalar,
    an iota): recomputing it in each consumer costs less than reading it back from memory."""
    return (fusion.fusion_kind == "kLoop" and not fusion.shape.is_tuple
            and all(i.opcode in CHEAP_FUSED_OPS for i in fusion.fused_computation.instructions))


def _creates_cycle(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """Is there a path producer -> ... -> consumer other than the direct edge?"""
    stack = [op for op in consumer.operands if op is not producer]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if node is producer:
            return True
        if node.unique_id in seen:
            continue
        seen.add(node.unique_id)
        stack.extend(node.operands)
    return False


def _size_problem(producer: HloInstruction, consumer: HloInstruction, config: FusionConfig) -> str | None:
    size = 1 if consumer.opcode != "fusion" else len(consumer.fused_computation.instructions)
    size += 1 if producer.opcode != "fusion" else len(producer.fused_computation.instructions)
    if size > config.max_instructions:
        return f"the fusion would hold {size} instructions (limit {config.max_instructions})"
    operands = {id(o) for o in consumer.operands if o is not producer} | {id(o) for o in producer.operands}
    if len(operands) > config.max_operands:
        return f"the fusion would read {len(operands)} operands (limit {config.max_operands})"
    return None


def fusion_decision(producer: HloInstruction, consumer: HloInstruction, config: FusionConfig) -> str | None:
    """``None`` to fuse ``producer`` into ``consumer``, else the reason not to."""
    checks = (
        consumer_can_host(consumer),
        _producer_problem(producer, consumer, config),
        _kind_problem(producer, consumer),
        _would_duplicate(producer, consumer, config),
        _size_problem(producer, consumer, config),
    )
    for problem in checks:
        if problem is not None:
            return problem
    # A second path producer -> ... -> consumer must leave the producer through another of its
    # users, so the producer stays for that user and is *copied* into the consumer; its operands
    # come before both, so no cycle can form. Only a producer that would be *moved* could close
    # one -- which is why multi-output fusion, which moves producers, checks paths itself.
    duplicated = any(u is not consumer for u in producer.users)
    if not duplicated and _creates_cycle(producer, consumer):
        return "fusing would create a cycle (another path leads from the producer to the consumer)"
    return None


def choose_kind(producer: HloInstruction, consumer: HloInstruction) -> str:
    if consumer.opcode == "fusion":
        if producer.opcode == "dot":
            return "kOutput"
        return consumer.fusion_kind
    if consumer.opcode == "reduce":
        return "kInput"
    if producer.opcode == "dot":
        return "kOutput"
    return "kLoop"
