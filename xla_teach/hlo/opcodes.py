"""The opcode table: one row per HLO opcode, spelled exactly as XLA's text format.

Like XLA's ``HLO_OPCODE_LIST``, this table is the single source of truth that the
parser, printer, verifier, builder and evaluator read: how many operands an
opcode takes, which attributes it carries (in the order the printer writes
them), and what kind of operation it is.

    "broadcast": OpInfo(DATA_MOVEMENT, arity=1, attrs=(Attr("dimensions", INT_LIST),))

Attributes whose ``default`` is not :data:`REQUIRED` are optional and are only
printed when their value differs from the default, as XLA does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from xla_teach.hlo.attributes import NO_WINDOW


class OpKind(enum.Enum):
    LEAF = "leaf"  # parameter, constant, iota, replica-id ...
    UNARY = "elementwise-unary"
    BINARY = "elementwise-binary"
    ELEMENTWISE = "elementwise-other"  # compare, select, clamp, convert ...
    DATA_MOVEMENT = "data-movement"  # broadcast, reshape, slice ...
    REDUCTION = "reduction"  # reduce, reduce-window, select-and-scatter
    CONTRACTION = "contraction"  # dot, convolution
    INDEXING = "indexing"  # gather, scatter
    SORT = "sort"
    TUPLE = "tuple"  # tuple, get-tuple-element
    CONTROL = "control"  # call, while, conditional, map, fusion
    SPECIAL = "special"  # custom-call, rng, collectives, barrier


class AttrKind(enum.Enum):
    """How an attribute value is written in HLO text (and its Python type)."""

    INT = "int"  # index=1                      -> int
    INT_LIST = "int-list"  # dimensions={1,0}       -> tuple[int, ...]
    BOOL = "bool"  # is_stable=true                 -> bool
    WORD = "word"  # direction=LT, kind=kLoop       -> str
    WORD_LIST = "word-list"  # operand_precision={default,default} -> tuple[str, ...]
    STRING = "string"  # custom_call_target="foo"   -> str
    COMPUTATION = "computation"  # to_apply=%add    -> HloComputation
    COMPUTATION_LIST = "computation-list"  # branch_computations={%a, %b}
    WINDOW = "window"  # window={size=2x2 ...}      -> Window
    SLICE = "slice"  # slice={[0:2], [1:3]}         -> tuple[SliceDim, ...]
    PADDING = "padding"  # padding=0_1x2_2_1        -> tuple[PaddingDim, ...]
    DIM_LABELS = "dim-labels"  # b01f_01io->b01f    -> ConvDimensionNumbers
    RAW = "raw"  # kept verbatim (replica_groups=...) -> str


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Attr:
    name: str
    kind: AttrKind
    default: Any = REQUIRED
    # Printed whenever set, even at its default (XLA always prints topk's largest=).
    print_default: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class OpInfo:
    """What the rest of the compiler needs to know about one opcode."""

    kind: OpKind
    arity: int | None  # None: variadic
    attrs: tuple[Attr, ...] = ()
    side_effect: bool = False
    # Roughly "costs more than a few cycles per element": never duplicated by fusion.
    expensive: bool = False
    traits: frozenset[str] = frozenset()  # see TRAITS below

    def has(self, trait: str) -> bool:
        return trait in self.traits

    def attr(self, name: str) -> Attr | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None


K = AttrKind
_DIMS = Attr("dimensions", K.INT_LIST)
_TO_APPLY = Attr("to_apply", K.COMPUTATION)
_PRECISION = Attr("operand_precision", K.WORD_LIST, ())


def _unary(expensive: bool = False) -> OpInfo:
    return OpInfo(OpKind.UNARY, 1, expensive=expensive)


def _binary(expensive: bool = False) -> OpInfo:
    return OpInfo(OpKind.BINARY, 2, expensive=expensive)


OPCODES: dict[str, OpInfo] = {
    "abs": _unary(),
    "add": _binary(),
    "after-all": OpInfo(OpKind.SPECIAL, None),
    "all-gather": OpInfo(OpKind.SPECIAL, None, (
        Attr("channel_id", K.INT, None), Attr("replica_groups", K.RAW, "{}"), _DIMS,
        Attr("use_global_device_ids", K.BOOL, False))),
    "all-reduce": OpInfo(OpKind.SPECIAL, None, (
        Attr("channel_id", K.INT, None), Attr("replica_groups", K.RAW, "{}"),
        Attr("use_global_device_ids", K.BOOL, False), _TO_APPLY)),
    # Asynchronous pairs (XLA's GPU schedules compute between start and done): the start returns
    # what the done needs -- all-reduce's result; all-gather's (operand, result); collective-permute's
    # (operand, result[, u32 context, u32 context]) -- and the done returns the result.
    "all-reduce-start": OpInfo(OpKind.SPECIAL, None, (
        Attr("channel_id", K.INT, None), Attr("replica_groups", K.RAW, "{}"),
        Attr("use_global_device_ids", K.BOOL, False), _TO_APPLY)),
    "all-reduce-done": OpInfo(OpKind.SPECIAL, 1),
    "all-gather-start": OpInfo(OpKind.SPECIAL, None, (
        Attr("channel_id", K.INT, None), Attr("replica_groups", K.RAW, "{}"), _DIMS,
        Attr("use_global_device_ids", K.BOOL, False))),
    "all-gather-done": OpInfo(OpKind.SPECIAL, 1),
    "collective-broadcast": OpInfo(OpKind.SPECIAL, 1, (
        Attr("channel_id", K.INT, None), Attr("replica_groups", K.RAW, "{}"))),
    "collective-permute-start": OpInfo(OpKind.SPECIAL, 1, (
        Attr("channel_id", K.INT, None), Attr("source_target_pairs", K.RAW))),
    "collective-permute-done": OpInfo(OpKind.SPECIAL, 1),
    "all-to-all": OpInfo(OpKind.SPECIAL, None, (
        Attr("channel_id", K.INT, None), Attr("replica_groups", K.RAW, "{}"), Attr("dimensions", K.INT_LIST, None))),
    "and": _binary(),
    "atan2": _binary(expensive=True),
    "bitcast": OpInfo(OpKind.DATA_MOVEMENT, 1),
    "bitcast-convert": OpInfo(OpKind.ELEMENTWISE, 1),
    "broadcast": OpInfo(OpKind.DATA_MOVEMENT, 1, (_DIMS,)),
    "call": OpInfo(OpKind.CONTROL, None, (_TO_APPLY,), expensive=True),
    "cbrt": _unary(expensive=True),
    "ceil": _unary(),
    "clamp": OpInfo(OpKind.ELEMENTWISE, 3),
    "collective-permute": OpInfo(OpKind.SPECIAL, 1, (
        Attr("channel_id", K.INT, None), Attr("source_target_pairs", K.RAW))),
    "compare": OpInfo(OpKind.ELEMENTWISE, 2, (
        Attr("direction", K.WORD), Attr("type", K.WORD, None))),
    "concatenate": OpInfo(OpKind.DATA_MOVEMENT, None, (_DIMS,)),
    "conditional": OpInfo(OpKind.CONTROL, None, (
        Attr("true_computation", K.COMPUTATION, None), Attr("false_computation", K.COMPUTATION, None),
        Attr("branch_computations", K.COMPUTATION_LIST, None)), expensive=True),
    "constant": OpInfo(OpKind.LEAF, 0),
    "convert": OpInfo(OpKind.ELEMENTWISE, 1),
    "convolution": OpInfo(OpKind.CONTRACTION, 2, (
        Attr("window", K.WINDOW, NO_WINDOW), Attr("dim_labels", K.DIM_LABELS),
        Attr("feature_group_count", K.INT, 1), Attr("batch_group_count", K.INT, 1), _PRECISION),
        expensive=True),
    "copy": OpInfo(OpKind.DATA_MOVEMENT, 1),
    "cosine": _unary(expensive=True),
    "count-leading-zeros": _unary(),
    "custom-call": OpInfo(OpKind.SPECIAL, None, (
        Attr("window", K.WINDOW, None), Attr("dim_labels", K.DIM_LABELS, None),
        Attr("feature_group_count", K.INT, 1), Attr("batch_group_count", K.INT, 1),
        Attr("custom_call_target", K.STRING),
        Attr("operand_layout_constraints", K.RAW, None),
        Attr("custom_call_has_side_effect", K.BOOL, False),
        Attr("output_to_operand_aliasing", K.RAW, None),
        Attr("schedule", K.WORD, None),
        Attr("api_version", K.WORD, "API_VERSION_ORIGINAL"),
        Attr("called_computations", K.COMPUTATION_LIST, ())), expensive=True),
    "divide": _binary(expensive=True),
    "dot": OpInfo(OpKind.CONTRACTION, 2, (
        Attr("lhs_batch_dims", K.INT_LIST, ()), Attr("lhs_contracting_dims", K.INT_LIST, ()),
        Attr("rhs_batch_dims", K.INT_LIST, ()), Attr("rhs_contracting_dims", K.INT_LIST, ()),
        _PRECISION, Attr("algorithm", K.RAW, None)), expensive=True),
    "dynamic-slice": OpInfo(OpKind.DATA_MOVEMENT, None, (Attr("dynamic_slice_sizes", K.INT_LIST),)),
    "dynamic-update-slice": OpInfo(OpKind.DATA_MOVEMENT, None),
    "erf": _unary(expensive=True),
    "exponential": _unary(expensive=True),
    "exponential-minus-one": _unary(expensive=True),
    "floor": _unary(),
    "fusion": OpInfo(OpKind.CONTROL, None, (
        Attr("kind", K.WORD), Attr("calls", K.COMPUTATION)), expensive=True),
    "gather": OpInfo(OpKind.INDEXING, 2, (
        Attr("offset_dims", K.INT_LIST), Attr("collapsed_slice_dims", K.INT_LIST),
        Attr("start_index_map", K.INT_LIST), Attr("operand_batching_dims", K.INT_LIST, ()),
        Attr("start_indices_batching_dims", K.INT_LIST, ()), Attr("index_vector_dim", K.INT),
        Attr("slice_sizes", K.INT_LIST), Attr("indices_are_sorted", K.BOOL, False)),
        expensive=True),
    "get-tuple-element": OpInfo(OpKind.TUPLE, 1, (Attr("index", K.INT),)),
    "iota": OpInfo(OpKind.LEAF, 0, (Attr("iota_dimension", K.INT),)),
    "is-finite": _unary(),
    "log": _unary(expensive=True),
    "log-plus-one": _unary(expensive=True),
    "logistic": _unary(expensive=True),
    "map": OpInfo(OpKind.CONTROL, None, (_DIMS, _TO_APPLY), expensive=True),
    "maximum": _binary(),
    "minimum": _binary(),
    "multiply": _binary(),
    "negate": _unary(),
    "not": _unary(),
    "opt-barrier": OpInfo(OpKind.SPECIAL, 1),
    "or": _binary(),
    "pad": OpInfo(OpKind.DATA_MOVEMENT, 2, (Attr("padding", K.PADDING),)),
    "parameter": OpInfo(OpKind.LEAF, 0, (Attr("parameter_replication", K.RAW, None),), expensive=True),
    "partition-id": OpInfo(OpKind.LEAF, 0),
    "popcnt": _unary(),
    "power": _binary(expensive=True),
    "reduce": OpInfo(OpKind.REDUCTION, None, (_DIMS, _TO_APPLY), expensive=True),
    "reduce-precision": OpInfo(OpKind.ELEMENTWISE, 1, (
        Attr("exponent_bits", K.INT), Attr("mantissa_bits", K.INT))),
    "reduce-window": OpInfo(OpKind.REDUCTION, None, (Attr("window", K.WINDOW, NO_WINDOW), _TO_APPLY),
                            expensive=True),
    "remainder": _binary(expensive=True),
    "reduce-scatter": OpInfo(OpKind.SPECIAL, None, (
        Attr("channel_id", K.INT, None), Attr("replica_groups", K.RAW, "{}"), _DIMS,
        Attr("use_global_device_ids", K.BOOL, False), _TO_APPLY)),
    "replica-id": OpInfo(OpKind.LEAF, 0),
    "reshape": OpInfo(OpKind.DATA_MOVEMENT, 1, (Attr("inferred_dimension", K.INT, None),)),
    "reverse": OpInfo(OpKind.DATA_MOVEMENT, 1, (_DIMS,)),
    "rng": OpInfo(OpKind.SPECIAL, 2, (Attr("distribution", K.WORD),), side_effect=True, expensive=True),
    "rng-bit-generator": OpInfo(OpKind.SPECIAL, 1, (Attr("algorithm", K.WORD, "rng_default"),),
                                expensive=True),
    # XLA's kRngGetAndUpdateState: the legacy rng's hidden Philox state, read and advanced.
    "rng-get-and-update-state": OpInfo(OpKind.SPECIAL, 0, (Attr("delta", K.INT),), side_effect=True),
    "round-nearest-afz": _unary(),
    "round-nearest-even": _unary(),
    "rsqrt": _unary(expensive=True),
    # XLA's kScan (JAX 0.11 writes cumsum/cumprod/cummax... with it): N inputs, then ``num_carries`` initial
    # carries; ``to_apply`` maps (one slice of each input, the carries) to (outputs..., new carries...).
    "scan": OpInfo(OpKind.CONTROL, None, (
        _DIMS, Attr("num_carries", K.INT), Attr("is_reverse", K.BOOL, False), Attr("is_associative", K.BOOL, False),
        _TO_APPLY), expensive=True),
    "scatter": OpInfo(OpKind.INDEXING, None, (
        Attr("update_window_dims", K.INT_LIST), Attr("inserted_window_dims", K.INT_LIST),
        Attr("scatter_dims_to_operand_dims", K.INT_LIST), Attr("input_batching_dims", K.INT_LIST, ()),
        Attr("scatter_indices_batching_dims", K.INT_LIST, ()), Attr("index_vector_dim", K.INT),
        Attr("indices_are_sorted", K.BOOL, False), Attr("unique_indices", K.BOOL, False), _TO_APPLY),
        expensive=True),
    "select": OpInfo(OpKind.ELEMENTWISE, 3),
    "select-and-scatter": OpInfo(OpKind.REDUCTION, 3, (
        Attr("window", K.WINDOW, NO_WINDOW), Attr("select", K.COMPUTATION), Attr("scatter", K.COMPUTATION)),
        expensive=True),
    "shift-left": _binary(),
    "shift-right-arithmetic": _binary(),
    "shift-right-logical": _binary(),
    "sign": _unary(),
    "sine": _unary(expensive=True),
    "slice": OpInfo(OpKind.DATA_MOVEMENT, 1, (Attr("slice", K.SLICE),)),
    "sort": OpInfo(OpKind.SORT, None, (_DIMS, Attr("is_stable", K.BOOL, False), _TO_APPLY), expensive=True),
    "sqrt": _unary(expensive=True),
    "subtract": _binary(),
    "tan": _unary(expensive=True),
    "tanh": _unary(expensive=True),
    # ``is_stable=true`` (JAX 0.11 writes it): ties keep their input order; xla_teach's topk always does.
    "topk": OpInfo(OpKind.SORT, 1, (Attr("k", K.INT), Attr("largest", K.BOOL, True, print_default=True),
                                    Attr("is_stable", K.BOOL, False)), expensive=True),
    "transpose": OpInfo(OpKind.DATA_MOVEMENT, 1, (_DIMS,)),
    "tuple": OpInfo(OpKind.TUPLE, None),
    "while": OpInfo(OpKind.CONTROL, 1, (
        Attr("condition", K.COMPUTATION), Attr("body", K.COMPUTATION)), expensive=True),
    "xor": _binary(),
}

# Opcodes that are elementwise maps over their operands' elements (same index in, same out).
ELEMENTWISE_KINDS = frozenset({OpKind.UNARY, OpKind.BINARY, OpKind.ELEMENTWISE})
COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
COMPARISON_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")
FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")


def op_info(opcode: str) -> OpInfo:
    """Row of the table; a clear error for an opcode xla_teach does not know."""
    try:
        return OPCODES[opcode]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(opcode, OPCODES, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"unknown HLO opcode '{opcode}'{hint}") from None


# ---- traits: what kind of thing an op is, declared once ---------------------------------------
# Each trait below lists its opcodes; the table's rows carry them (``op_info("add").has("commutative")``)
# and every set of opcodes the compiler tests against is derived from here (:func:`opcodes_with`),
# so a new op joins a set in this one place, and tests/hlo/test_op_traits.py says which.
TRAITS: dict[str, tuple[str, tuple[str, ...]]] = {
    "commutative": ("f(a, b) = f(b, a): CSE sorts their operands, reductions may swap them",
                    ("add", "multiply", "maximum", "minimum", "and", "or", "xor")),
    "associative": ("f(f(a, b), c) = f(a, f(b, c)): a reduction by it may be regrouped, as a tree",
                    ("add", "multiply", "maximum", "minimum", "and", "or", "xor")),
    "transcendental": ("counted as transcendentals by cost analysis (XLA's HloCostAnalysis)",
                       ("exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "power",
                        "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "atan2", "erf")),
    "names-buffer": ("computes nothing: its value is a buffer that already exists (no kernel, no thunk)",
                     ("parameter", "constant", "tuple", "get-tuple-element", "bitcast", "opt-barrier", "after-all")),
    "aliases-operand": ("its value is (a piece of) an operand's buffer: buffer assignment shares it",
                        ("tuple", "get-tuple-element", "bitcast", "opt-barrier")),
    "host-step": ("the runtime runs it on the host -- nested sequences, a callback -- not as a kernel",
                  ("while", "conditional", "call", "custom-call")),
    "cross-device": ("meets the other devices of a multi-device program (run on the host with them)",
                     ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                      "collective-broadcast", "partition-id", "replica-id")),
    "control-flow": ("runs other computations as steps of the program (not fused code): a loop, a branch, a call",
                     ("while", "conditional", "call", "scan")),
    "not-pure": ("its result is not a function of its operands' values alone (random numbers, the device it runs "
                 "on, other devices' data, the outside world, a barrier): never folded at compile time or "
                 "hoisted out of a loop",
                 ("custom-call", "rng", "rng-bit-generator", "rng-get-and-update-state", "after-all", "opt-barrier",
                  "replica-id", "partition-id", "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                  "collective-permute", "collective-broadcast", "all-reduce-start", "all-reduce-done",
                  "all-gather-start", "all-gather-done", "collective-permute-start", "collective-permute-done")),
    "index-mapped": ("each output element is one operand element found by index arithmetic (or made from its "
                     "index, iota): a loop fusion computes it element by element, with no arithmetic on values",
                     ("broadcast", "reshape", "transpose", "slice", "pad", "concatenate", "reverse", "iota",
                      "bitcast", "dynamic-slice", "gather")),
}
for _trait, (_, _names) in TRAITS.items():
    for _name in _names:
        _row = OPCODES[_name]
        OPCODES[_name] = OpInfo(_row.kind, _row.arity, _row.attrs, _row.side_effect, _row.expensive,
                                _row.traits | {_trait})


def opcodes_with(trait: str) -> frozenset[str]:
    """Every opcode that has ``trait`` (one of :data:`TRAITS`)."""
    if trait not in TRAITS:
        raise ValueError(f"unknown op trait '{trait}' (traits: {', '.join(TRAITS)})")
    return frozenset(name for name, info in OPCODES.items() if info.has(trait))


COMMUTATIVE_OPCODES = opcodes_with("commutative")
ASSOCIATIVE_OPCODES = opcodes_with("associative")
TRANSCENDENTAL_OPCODES = opcodes_with("transcendental")
BUFFER_NAMING_OPCODES = opcodes_with("names-buffer")
ALIASING_OPCODES = opcodes_with("aliases-operand")
HOST_STEP_OPCODES = opcodes_with("host-step")
# Ops that meet the other devices of a multi-device program (a backend runs them on the host,
# with the other devices, when the module's header asks for several).
CROSS_DEVICE_OPCODES = opcodes_with("cross-device")
CONTROL_FLOW_OPCODES = opcodes_with("control-flow")
NOT_PURE_OPCODES = opcodes_with("not-pure")
INDEX_MAPPED_OPCODES = opcodes_with("index-mapped")
# An asynchronous collective's start -> the synchronous collective it splits in two.
ASYNC_COLLECTIVES = {"all-reduce-start": "all-reduce", "all-gather-start": "all-gather",
                     "collective-permute-start": "collective-permute"}


def is_elementwise(opcode: str) -> bool:
    """True for ops computing out[i] from operands[i] only (includes compare/select/convert).

    ``bitcast-convert`` is only elementwise between types of equal width; callers that care
    check shapes. ``copy`` counts as elementwise (it copies element i to element i).
    """
    if opcode == "copy":
        return True
    info = OPCODES.get(opcode)
    return info is not None and info.kind in ELEMENTWISE_KINDS
