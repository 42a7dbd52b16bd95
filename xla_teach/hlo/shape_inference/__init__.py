"""Shape inference: which shape does an op produce from its operands and attributes?

XLA's ``ShapeInference`` answers this for the builder (to know the shape of a new
op) and for the verifier (to check the shape written on an instruction). Here
:func:`infer_shape` does both jobs: it dispatches on the opcode to one small rule
per opcode family, each in its own file:

=============================  ==========================================================
``shape_inference_elementwise``  unary, binary, compare, select, clamp, convert, bitcast-convert
``shape_inference_data``         broadcast, reshape, transpose, slices, concatenate, pad, copy...
``shape_inference_reduce``       reduce, reduce-window, select-and-scatter, sort, topk
``shape_inference_contraction``  dot, convolution
``shape_inference_indexing``     gather, scatter
``shape_inference_control``      tuples, call/map/fusion/while/conditional, collectives, rng, leaves
=============================  ==========================================================

**What cannot be inferred.** Some ops carry part of their result in the
instruction itself. Those parts come in through keywords:

* ``result_element_type``: the new type of ``convert`` / ``bitcast-convert``; the
  preferred (wider) type of ``dot`` / ``convolution`` (optional there).
* ``result_dims``: the output dimensions of ``broadcast`` and ``reshape``.
* ``declared_shape``: the shape written on the instruction. It supplies the two
  items above when they are not given, and the whole result of the ops in
  :data:`DECLARED_SHAPE_OPCODES` (``parameter``, ``constant``, ``iota``,
  ``custom-call``, ``rng``, ``bitcast``, ``all-gather``) and the bits of
  ``rng-bit-generator``. The declared shape is still *checked* (a constant's
  literal, an iota dimension, a bitcast's byte size...).

The verifier always passes ``declared_shape=instr.shape``; the builder passes the
keywords. Everything else is genuinely inferred, so a declared shape that
disagrees with it is a verifier error::

    >>> infer_shape("pad", [Shape.array("f32", (4, 8)), Shape.scalar("f32")],
    ...             {"padding": (PaddingDim(1, 1), PaddingDim(0, 1, 1))}).to_text()
    'f32[6,16]{1,0}'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.opcodes import CONTROL_FLOW_OPCODES, OPCODES
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import OpContext
from xla_teach.hlo.shape_inference.contraction import CONTRACTION_RULES
from xla_teach.hlo.shape_inference.control import CONTROL_RULES
from xla_teach.hlo.shape_inference.data import DATA_MOVEMENT_RULES
from xla_teach.hlo.shape_inference.elementwise import ELEMENTWISE_RULES, default_comparison_type
from xla_teach.hlo.shape_inference.indexing import INDEXING_RULES
from xla_teach.hlo.shape_inference.reduce import REDUCTION_RULES
from xla_teach.hlo.types import PrimitiveType

__all__ = [
    "DECLARED_SHAPE_OPCODES",
    "INFERENCE_RULES",
    "ShapeError",
    "default_comparison_type",
    "infer_shape",
    "needs_declared_shape",
]

Rule = Callable[[OpContext], Shape]

# One rule per opcode: the table the dispatcher reads.
INFERENCE_RULES: dict[str, Rule] = {
    **ELEMENTWISE_RULES,
    **DATA_MOVEMENT_RULES,
    **REDUCTION_RULES,
    **CONTRACTION_RULES,
    **INDEXING_RULES,
    **CONTROL_RULES,
}

_missing = set(OPCODES) - set(INFERENCE_RULES)
assert not _missing, f"opcodes without a shape-inference rule: {sorted(_missing)}"

# Ops a token may flow into: control flow passes it through, the rest make or carry state.
TAKES_TOKENS = CONTROL_FLOW_OPCODES | {"after-all", "tuple", "get-tuple-element", "custom-call", "opt-barrier",
                                      "parameter"}
# Ops whose whole result shape is taken from the instruction (and then checked).
DECLARED_SHAPE_OPCODES = frozenset({"parameter", "constant", "iota", "custom-call", "rng", "bitcast", "all-gather",
                                    "reduce-scatter", "all-gather-start", "collective-permute-start"})
# Ops that need part of the result from a keyword (see the module docstring).
_NEEDS_DIMS = frozenset({"broadcast", "reshape"})
_NEEDS_TYPE = frozenset({"convert", "bitcast-convert"})


def needs_declared_shape(opcode: str) -> bool:
    """True when ``infer_shape`` needs more than operands and attributes for ``opcode``
    (``declared_shape``, or ``result_dims`` / ``result_element_type``)."""
    return opcode in DECLARED_SHAPE_OPCODES or opcode in _NEEDS_DIMS or opcode in _NEEDS_TYPE or (
        opcode == "rng-bit-generator"
    )


def infer_shape(
    opcode: str,
    operand_shapes: Sequence[Shape],
    attrs: Mapping[str, Any] | None = None,
    *,
    result_element_type: PrimitiveType | str | None = None,
    result_dims: Sequence[int] | None = None,
    declared_shape: Shape | None = None,
) -> Shape:
    """The shape ``opcode`` produces for operands of ``operand_shapes`` with ``attrs``
    (typed attribute values, as in ``HloInstruction.attrs``).

    Raises :class:`ShapeError` (message: opcode, operand shapes, what is wrong) when
    the op is not valid for these operands. Returned array shapes carry the default
    layout (compare with ``Shape.compatible`` to ignore layouts).
    """
    if opcode not in OPCODES:
        raise ShapeError(opcode, operand_shapes, "unknown opcode")
    if isinstance(result_element_type, str):
        result_element_type = PrimitiveType.from_name(result_element_type)
    ctx = OpContext(
        opcode=opcode,
        operands=tuple(operand_shapes),
        attrs=dict(attrs or {}),
        result_element_type=result_element_type,
        result_dims=tuple(int(d) for d in result_dims) if result_dims is not None else None,
        declared_shape=declared_shape,
    )
    arity = OPCODES[opcode].arity
    if arity is not None and len(ctx.operands) != arity:
        raise ctx.fail(f"takes {arity} operand(s) but got {len(ctx.operands)}")
    for i, s in enumerate(ctx.operands):
        if s.is_token and opcode not in TAKES_TOKENS:
            raise ctx.fail(f"operand {i} is a token, which {opcode} does not accept")
    return INFERENCE_RULES[opcode](ctx)
