"""Exercise `fusion_decision`: decide whether a producer should be fused into its consumer.

Every HLO instruction outside a fusion is a kernel that reads its operands from memory
and writes its result back. Fusing a producer into its consumer computes the producer
inside the consumer's loop, element by element, so the intermediate never goes to
memory. ``InstructionFusion`` visits consumers users-first and asks, for each operand,
``should_fuse(producer, consumer)``. Write that function, following these rules
(the CPU backend's, without output fusion). Return True unless a rule says no:

1. **The consumer must be able to host a fusion.**
   * a ``fusion`` instruction: yes, unless its fused computation's root is a ``tuple``
     (a multi-output fusion takes no more producers);
   * a ``reduce``: yes (it becomes the "hero" of a kInput fusion);
   * a loop-fusible instruction (see below): yes;
   * anything else (``dot``, ``tuple``, ``get-tuple-element``, ``custom-call``...): no.
2. **The producer must be computable per element.**
   * ``parameter``: no (an input, not a computation);
   * ``constant``: only a scalar (``shape.element_count() <= 1``); big literals stay in memory;
   * ``dot``: no (this backend keeps dots in their own kernel);
   * ``reduce``: no (it would be recomputed for every element of its consumer);
   * ``fusion``: only a ``kLoop`` fusion (``producer.fusion_kind``) whose result is not a tuple;
   * a loop-fusible instruction: yes; anything else: no.
3. **Never duplicate expensive work.** If the producer has users other than this
   consumer, fusing it copies it into the fusion while the original stays for the others.
   That is fine for cheap ops, but not if ``producer.info.expensive`` (exponential, tanh,
   divide, dot, fusion...).
4. **Copies cannot close cycles.** If the producer also reaches the consumer through another
   path (``n -> exp -> transpose -> add`` and ``n -> add``), that path leaves the producer
   through another of its users, so rule 3 applies: a cheap producer is *copied* into the
   consumer and the original stays for the other path -- no cycle forms, and there is no
   separate rule to write. (Multi-output fusion *moves* producers; it must check paths.)

*Loop-fusible* means: ``is_elementwise(instr.opcode)`` or ``instr.opcode`` in
``LOOP_FUSIBLE``, the result is not a tuple (``instr.shape.is_tuple``), and it is not
``rng``. (Ignore size limits: the grader's modules are small.)

For a fusion instruction: ``instr.opcode == "fusion"``, ``instr.fusion_kind`` ("kLoop",
"kInput"...), ``instr.fused_computation.root_instruction``. Graph: ``instr.operands``,
``instr.users``. Only look at the graph -- do not change it.

Grade it:  xla-teach grade fusion_decision path/to/fusion_decision.py
"""

from __future__ import annotations

from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import is_elementwise

LOOP_FUSIBLE = {"broadcast", "reshape", "transpose", "slice", "pad", "concatenate", "reverse", "iota", "bitcast",
                "dynamic-slice", "gather"}


def is_loop_fusible(instr: HloInstruction) -> bool:
    """Can a fused loop compute this instruction element by element?"""
    return ((is_elementwise(instr.opcode) or instr.opcode in LOOP_FUSIBLE)
            and not instr.shape.is_tuple and instr.opcode != "rng")


# BEGIN SOLUTION: one helper per rule keeps should_fuse readable
def _consumer_can_host(consumer: HloInstruction) -> bool:
    if consumer.opcode == "fusion":
        return consumer.fused_computation.root_instruction.opcode != "tuple"
    return consumer.opcode == "reduce" or is_loop_fusible(consumer)


def _producer_is_per_element(producer: HloInstruction) -> bool:
    if producer.opcode == "constant":
        return producer.shape.element_count() <= 1
    if producer.opcode == "fusion":
        return producer.fusion_kind == "kLoop" and not producer.shape.is_tuple
    return is_loop_fusible(producer)  # parameter, dot, reduce... are not


def _duplicates_expensive_work(producer: HloInstruction, consumer: HloInstruction) -> bool:
    others = [u for u in producer.users if u is not consumer]
    return bool(others) and producer.info.expensive

# END SOLUTION


def should_fuse(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """True if ``producer`` should be fused into ``consumer`` (rules 1-3 of the module docstring)."""
    # BEGIN SOLUTION: apply rules 1 to 3; return False as soon as one says no
    return (_consumer_can_host(consumer)
            and _producer_is_per_element(producer)
            and not _duplicates_expensive_work(producer, consumer))
    # END SOLUTION
