"""Shape inference for tuples, calls and control flow, collectives, random numbers
and the ops whose shape is declared rather than inferred.

Called computations decide these shapes: ``call``/``fusion`` give their callee's
root shape, ``while`` gives its init shape (and checks that body and condition
fit it), ``conditional`` gives the (common) root shape of its branches, ``scan`` stacks its
body's outputs along the scan dimension and passes its carries through.
"""

from __future__ import annotations

from collections.abc import Callable

from xla_teach.hlo.errors import shape_text, shapes_text
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.literal import literal_shape_problem
from xla_teach.hlo.opcodes import FUSION_KINDS
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference.context import (
    OpContext,
    check_arguments,
    check_predicate_computation,
    check_reducer,
    root_shape,
    signature_text,
)
from xla_teach.hlo.types import PrimitiveType

Rule = Callable[[OpContext], Shape]


# ---------------------------------------------------------------------------------------
# Tuples
# ---------------------------------------------------------------------------------------
def infer_tuple(ctx: OpContext) -> Shape:
    return Shape.make_tuple(list(ctx.operands))


def infer_get_tuple_element(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(1)
    operand = ctx.operands[0]
    index = ctx.int_attr("index")
    if not operand.is_tuple:
        raise ctx.fail(f"operand {shape_text(operand)} is not a tuple")
    if not 0 <= index < len(operand.tuple_shapes):
        raise ctx.fail(f"index={index} is out of range for the {len(operand.tuple_shapes)}-element tuple "
                       f"{shape_text(operand)}")
    return operand.tuple_shapes[index]


# ---------------------------------------------------------------------------------------
# Calls and control flow
# ---------------------------------------------------------------------------------------
def infer_call(ctx: OpContext) -> Shape:
    comp = ctx.computation("to_apply")
    check_arguments(ctx, comp, ctx.operands, "to_apply")
    return root_shape(ctx, comp)


def infer_fusion(ctx: OpContext) -> Shape:
    kind = ctx.attr("kind")
    if kind not in FUSION_KINDS:
        raise ctx.fail(f"kind={kind} is not one of {', '.join(FUSION_KINDS)}")
    comp = ctx.computation("calls")
    check_arguments(ctx, comp, ctx.operands, "calls")
    return root_shape(ctx, comp)


def infer_map(ctx: OpContext) -> Shape:
    """``to_apply`` maps N scalars (one per operand) to a scalar; ``dimensions`` must be
    all dimensions ``{0, ..., rank-1}``."""
    if not ctx.operands:
        raise ctx.fail("needs at least one operand")
    shapes = [ctx.array_operand(i) for i in range(len(ctx.operands))]
    if any(s.dimensions != shapes[0].dimensions for s in shapes):
        raise ctx.fail(f"all operands must have the same dimensions, got {shapes_text(shapes)}")
    dims = ctx.int_list("dimensions")
    if list(dims) != list(range(shapes[0].rank)):
        raise ctx.fail(f"dimensions={{{','.join(map(str, dims))}}} must be all dimensions in order")
    comp = ctx.computation("to_apply")
    check_arguments(ctx, comp, [Shape.scalar(s.element_type) for s in shapes], "to_apply")
    result = root_shape(ctx, comp)
    if not result.is_scalar:
        raise ctx.fail(f"to_apply={signature_text(comp)} must return a scalar")
    return Shape.array(result.element_type, shapes[0].dimensions)


def infer_while(ctx: OpContext) -> Shape:
    """The loop state keeps the init's shape: the condition takes it and returns ``pred[]``,
    the body takes it and returns it."""
    ctx.expect_operand_count(1)
    state = ctx.operands[0]
    check_predicate_computation(ctx, ctx.computation("condition"), [state], "condition")
    body = ctx.computation("body")
    check_arguments(ctx, body, [state], "body")
    if not root_shape(ctx, body).compatible(state):
        raise ctx.fail(f"body={signature_text(body)} must return the loop state {shape_text(state)}")
    return state


def scan_parts(ctx: OpContext) -> tuple[int, list[Shape], list[Shape]]:
    """``(d, inputs, initial carries)`` of a ``scan``: the last ``num_carries`` operands are the
    carries, the others the inputs; ``dimensions={d}`` names one dimension, the scan dimension."""
    carries = ctx.int_attr("num_carries")
    if not 0 <= carries <= len(ctx.operands):
        raise ctx.fail(f"num_carries={carries} must be between 0 and the {len(ctx.operands)} operand(s): the "
                       "operands are the inputs, then the initial carries")
    dims = ctx.int_list("dimensions")
    if len(dims) != 1:
        raise ctx.fail(f"dimensions={{{','.join(map(str, dims))}}} must name exactly one dimension (the scan's)")
    split = len(ctx.operands) - carries
    inputs = [ctx.array_operand(i, "input") for i in range(split)]
    inits = [ctx.array_operand(i, "initial carry") for i in range(split, len(ctx.operands))]
    return dims[0], inputs, inits


def scan_step_shapes(d: int, inputs: list[Shape]) -> list[Shape]:
    """What ``to_apply`` gets of each input at one step: the input without dimension ``d``."""
    return [Shape.array(s.element_type, s.dimensions[:d] + s.dimensions[d + 1:]) for s in inputs]


def stacked(shape: Shape, d: int, length: int) -> Shape:
    """A per-step output stacked over the scan: ``length`` inserted as dimension ``d``."""
    return Shape.array(shape.element_type, shape.dimensions[:d] + (length,) + shape.dimensions[d:])


def infer_scan(ctx: OpContext) -> Shape:
    """``scan(inputs..., inits...)``: ``to_apply`` takes one slice of each input along ``dimensions={d}``
    (that dimension removed), then the carries, and returns ``(outputs..., new carries...)``, the
    carries keeping their shapes. The result is ``(outputs stacked along d..., final carries...)``:
    each output with the scan's length inserted as dimension d. The length is the inputs' (all
    equal) or, for a scan without inputs, the declared result's."""
    d, inputs, inits = scan_parts(ctx)
    body = ctx.computation("to_apply")
    if body.num_parameters != len(ctx.operands):
        raise ctx.fail(f"has {len(inputs)} input(s) and {len(inits)} carry(ies) (num_carries={len(inits)}) but "
                       f"to_apply={signature_text(body)} takes {body.num_parameters} parameter(s), one per operand")
    for i, s in enumerate(inputs):
        if not 0 <= d < s.rank:
            raise ctx.fail(f"dimensions={{{d}}} is out of range for input {i} {shape_text(s)}")
    lengths = sorted({s.dimensions[d] for s in inputs})
    if len(lengths) > 1:
        raise ctx.fail(f"the inputs must have the same length along the scan dimension {d}, got "
                       f"{shapes_text(inputs)}")
    check_arguments(ctx, body, scan_step_shapes(d, inputs) + inits, "to_apply")
    root = root_shape(ctx, body)
    count = len(root.tuple_shapes) if root.is_tuple else 0
    if not root.is_tuple or count < len(inits):
        raise ctx.fail(f"to_apply={signature_text(body)} must return a tuple (outputs..., new carries...) "
                       f"ending in the {len(inits)} carries")
    outputs, carries = list(root.tuple_shapes[:count - len(inits)]), root.tuple_shapes[count - len(inits):]
    for k, (new, init) in enumerate(zip(carries, inits, strict=True)):
        if not new.compatible(init):
            raise ctx.fail(f"to_apply={signature_text(body)} returns carry {k} as {shape_text(new)}, but its "
                           f"initial value is {shape_text(init)}")
    for k, out in enumerate(outputs):
        if not out.is_array or out.rank < d:
            raise ctx.fail(f"output {k} of to_apply={signature_text(body)} is {shape_text(out)}: the scan "
                           f"dimension {d} cannot be inserted into it (an array of rank >= {d} is needed)")
    if lengths:
        length = lengths[0]
    elif not outputs:
        raise ctx.fail("needs at least one input or one output: the scan's length comes from them")
    else:  # no inputs: the length is written on the instruction
        declared = ctx.declared_shape
        first = declared.tuple_shapes[0] if declared is not None and declared.is_tuple and declared.tuple_shapes \
            else None
        if first is None or not first.is_array or first.rank != outputs[0].rank + 1:
            raise ctx.fail("a scan without inputs takes its length from its declared result; pass declared_shape= "
                           f"(a tuple whose first element is output 0, {shape_text(outputs[0])}, stacked along "
                           f"dimension {d})")
        length = first.dimensions[d]
    return Shape.make_tuple([stacked(out, d, length) for out in outputs] + list(inits))


def _branches(ctx: OpContext) -> list[HloComputation]:
    branches = ctx.attrs.get("branch_computations")
    true_comp, false_comp = ctx.attrs.get("true_computation"), ctx.attrs.get("false_computation")
    if branches and (true_comp is not None or false_comp is not None):
        raise ctx.fail("use either branch_computations or true/false_computation, not both")
    if branches:
        if not all(isinstance(b, HloComputation) for b in branches):
            raise ctx.fail("branch_computations must be computations")
        return list(branches)
    if not isinstance(true_comp, HloComputation) or not isinstance(false_comp, HloComputation):
        raise ctx.fail("needs true_computation and false_computation (or branch_computations)")
    return [true_comp, false_comp]


def infer_conditional(ctx: OpContext) -> Shape:
    """Pred form ``conditional(p, t_arg, f_arg)`` or index form ``conditional(i, arg_0..)``:
    branch k takes operand k+1; all branches return the same shape."""
    branches = _branches(ctx)
    indexed = "branch_computations" in ctx.attrs and bool(ctx.attrs["branch_computations"])
    if len(ctx.operands) != len(branches) + 1:
        raise ctx.fail(f"{len(branches)} branches need {len(branches) + 1} operands (selector first), "
                       f"got {len(ctx.operands)}")
    selector = ctx.operands[0]
    want = Shape.scalar(PrimitiveType.S32 if indexed else PrimitiveType.PRED)
    if not selector.compatible(want):
        raise ctx.fail(f"the branch selector must be {shape_text(want)}, got {shape_text(selector)}")
    result: Shape | None = None
    for k, branch in enumerate(branches):
        check_arguments(ctx, branch, [ctx.operands[k + 1]], f"branch {k}")
        root = root_shape(ctx, branch)
        if result is not None and not root.compatible(result):
            raise ctx.fail(f"branch {k} {signature_text(branch)} returns {shape_text(root)} but branch 0 returns "
                           f"{shape_text(result)}")
        result = result or root
    assert result is not None
    return result


def infer_identity(ctx: OpContext) -> Shape:
    """``opt-barrier`` and ``collective-permute``: the operand's shape."""
    ctx.expect_operand_count(1)
    return ctx.operands[0]


# ---------------------------------------------------------------------------------------
# Collectives (single-program view)
# ---------------------------------------------------------------------------------------
def infer_all_reduce(ctx: OpContext) -> Shape:
    """Same shapes out as in (a tuple when there are several operands)."""
    if not ctx.operands:
        raise ctx.fail("needs at least one operand")
    leaves = [leaf for s in ctx.operands for leaf in s.leaf_shapes()]
    if not all(leaf.is_array for leaf in leaves):
        raise ctx.fail(f"operands must be arrays, got {shapes_text(ctx.operands)}")
    types = [leaf.element_type for leaf in leaves]
    if len(set(types)) == 1:
        check_reducer(ctx, ctx.computation("to_apply"), types[:1], types[:1])
    return ctx.operands[0] if len(ctx.operands) == 1 else Shape.make_tuple(list(ctx.operands))


def infer_all_gather(ctx: OpContext) -> Shape:
    """The declared shape: the operand's, with the gather dimension multiplied by the
    (unknown here) group size."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    result = ctx.declared()
    dims = ctx.int_list("dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank:
        raise ctx.fail(f"dimensions must name one dimension of {shape_text(operand)}")
    d = dims[0]
    others_equal = result.is_array and result.rank == operand.rank and all(
        a == b for i, (a, b) in enumerate(zip(result.dimensions, operand.dimensions, strict=True)) if i != d
    )
    if not others_equal or result.element_type is not operand.element_type or (
        operand.dimensions[d] and result.dimensions[d] % operand.dimensions[d]
    ):
        raise ctx.fail(f"declared {shape_text(result)} is not {shape_text(operand)} gathered along dimension {d}")
    return result


def infer_reduce_scatter(ctx: OpContext) -> Shape:
    """The declared shape: the operand's, with the scatter dimension divided by the (unknown
    here) group size; ``to_apply`` reduces two scalars of the element type."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    result = ctx.declared()
    dims = ctx.int_list("dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank:
        raise ctx.fail(f"dimensions must name one dimension of {shape_text(operand)}")
    d = dims[0]
    check_reducer(ctx, ctx.computation("to_apply"), [operand.element_type], [operand.element_type])
    others_equal = result.is_array and result.rank == operand.rank and all(
        a == b for i, (a, b) in enumerate(zip(result.dimensions, operand.dimensions, strict=True)) if i != d)
    if not others_equal or result.element_type is not operand.element_type or (
            result.dimensions[d] and operand.dimensions[d] % result.dimensions[d]):
        raise ctx.fail(f"declared {shape_text(result)} is not {shape_text(operand)} scattered along dimension {d}")
    return result


def infer_all_to_all(ctx: OpContext) -> Shape:
    """Same shape out as in: one array (split and concatenated along ``dimensions``), or a tuple
    of the operands' shapes when there are several (one piece per device)."""
    if not ctx.operands:
        raise ctx.fail("needs at least one operand")
    for i in range(len(ctx.operands)):
        ctx.array_operand(i)
    dims = ctx.attrs.get("dimensions")
    if dims is not None and (len(dims) != 1 or not 0 <= dims[0] < ctx.operands[0].rank):
        raise ctx.fail(f"dimensions must name one dimension of {shape_text(ctx.operands[0])}")
    return ctx.operands[0] if len(ctx.operands) == 1 else Shape.make_tuple(list(ctx.operands))


def infer_u32_scalar(ctx: OpContext) -> Shape:
    """``replica-id`` / ``partition-id``."""
    ctx.expect_operand_count(0)
    return Shape.scalar(PrimitiveType.U32)


def infer_after_all(ctx: OpContext) -> Shape:
    for i, s in enumerate(ctx.operands):
        if not s.is_token:
            raise ctx.fail(f"operand {i} must be a token, got {shape_text(s)}")
    return Shape.token()


# ---------------------------------------------------------------------------------------
# Random numbers
# ---------------------------------------------------------------------------------------
_STATE_SIZES = {"rng_default": (2, 3), "rng_three_fry": (2,), "rng_philox": (2, 3)}


def infer_rng_bit_generator(ctx: OpContext) -> Shape:
    """``(new_state, bits)``: the state keeps its shape (``u64[2]`` or ``u64[3]``); the bits'
    shape is declared (``declared_shape`` tuple element 1, or ``result_dims`` +
    ``result_element_type``)."""
    ctx.expect_operand_count(1)
    state = ctx.array_operand(0, "state")
    algorithm = ctx.attr("algorithm")
    if algorithm not in _STATE_SIZES:
        raise ctx.fail(f"algorithm={algorithm} is not one of {', '.join(_STATE_SIZES)}")
    if state.element_type is not PrimitiveType.U64 or state.rank != 1 or state.dimensions[0] not in _STATE_SIZES[
        algorithm
    ]:
        sizes = " or ".join(f"u64[{n}]" for n in _STATE_SIZES[algorithm])
        raise ctx.fail(f"the {algorithm} state must be {sizes}, got {shape_text(state)}")
    if ctx.result_dims is not None and ctx.result_element_type is not None:
        bits = Shape.array(ctx.result_element_type, ctx.result_dims)
    else:
        declared = ctx.declared()
        if not declared.is_tuple or len(declared.tuple_shapes) != 2:
            raise ctx.fail(f"the declared shape {shape_text(declared)} must be a (state, bits) tuple")
        bits = declared.tuple_shapes[1]
    if not bits.is_array or not bits.element_type.is_unsigned_int:
        raise ctx.fail(f"the generated bits must be an unsigned integer array, got {shape_text(bits)}")
    return Shape.make_tuple([state, bits])


def infer_rng_get_and_update_state(ctx: OpContext) -> Shape:
    """``u64[2]``, the Philox state ``{key, counter}`` before advancing it by ``delta >= 0`` blocks."""
    ctx.expect_operand_count(0)
    delta = ctx.attr("delta")
    if isinstance(delta, bool) or not isinstance(delta, int) or not 0 <= delta < 2**64:
        raise ctx.fail(f"delta={delta} must be an integer in [0, 2^64)")
    return Shape.array(PrimitiveType.U64, (2,))


def infer_rng(ctx: OpContext) -> Shape:
    """Declared shape; ``a`` and ``b`` are scalars of its element type."""
    ctx.expect_operand_count(2)
    result = ctx.declared()
    distribution = ctx.attr("distribution")
    if distribution not in ("rng_uniform", "rng_normal"):
        raise ctx.fail(f"distribution={distribution} is not rng_uniform or rng_normal")
    if not result.is_array or (distribution == "rng_normal" and not result.element_type.is_float):
        raise ctx.fail(f"{distribution} cannot produce {shape_text(result)}")
    for i, s in enumerate(ctx.operands):
        if not s.is_scalar or s.element_type is not result.element_type:
            raise ctx.fail(f"operand {i} must be a {result.element_type.value} scalar, got {shape_text(s)}")
    return result


# ---------------------------------------------------------------------------------------
# Declared shapes: parameter, constant, iota, custom-call
# ---------------------------------------------------------------------------------------
def infer_declared(ctx: OpContext) -> Shape:
    """parameter and custom-call: whatever the instruction declares."""
    if ctx.opcode == "parameter":
        ctx.expect_operand_count(0)
    return ctx.declared()


def infer_constant(ctx: OpContext) -> Shape:
    """The declared shape, checked against the literal when there is one."""
    ctx.expect_operand_count(0)
    result = ctx.declared()
    literal = ctx.attrs.get("literal")
    if literal is not None and not ctx.attrs.get("literal_elided"):
        problem = literal_shape_problem(literal, result)  # arrays, or tuples of them
        if problem is not None:
            raise ctx.fail(problem)
    return result


def infer_all_gather_start(ctx: OpContext) -> Shape:
    """``(operand, gathered)``: the declared tuple, whose second element is an all-gather's result."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    result = ctx.declared()
    if not (result.is_tuple and len(result.tuple_shapes) == 2 and result.tuple_shapes[0].compatible(operand)):
        raise ctx.fail(f"all-gather-start of {shape_text(operand)} returns (operand, gathered result), "
                       f"declared {shape_text(result)}")
    return result


def infer_collective_permute_start(ctx: OpContext) -> Shape:
    """``(operand, result)`` or ``(operand, result, u32[], u32[])``: the declared tuple."""
    ctx.expect_operand_count(1)
    operand = ctx.array_operand(0)
    result = ctx.declared()
    ok = result.is_tuple and len(result.tuple_shapes) in (2, 4) and all(
        s.compatible(operand) for s in result.tuple_shapes[:2])
    if not ok:
        raise ctx.fail(f"collective-permute-start of {shape_text(operand)} returns (operand, result[, u32[], u32[]]), "
                       f"declared {shape_text(result)}")
    return result


def infer_async_done(ctx: OpContext) -> Shape:
    """``*-done`` returns the collective's result: its start's value (all-reduce) or the tuple's
    second element (all-gather, collective-permute)."""
    ctx.expect_operand_count(1)
    start = ctx.operands[0]
    return start.tuple_shapes[1] if start.is_tuple else start


def infer_iota(ctx: OpContext) -> Shape:
    ctx.expect_operand_count(0)
    result = ctx.declared()
    dim = ctx.int_attr("iota_dimension")
    if not result.is_array or result.rank == 0 or not 0 <= dim < result.rank:
        raise ctx.fail(f"iota_dimension={dim} is out of range for {shape_text(result)} (rank >= 1 needed)")
    return result


CONTROL_RULES: dict[str, Rule] = {
    "tuple": infer_tuple,
    "get-tuple-element": infer_get_tuple_element,
    "call": infer_call,
    "fusion": infer_fusion,
    "map": infer_map,
    "while": infer_while,
    "scan": infer_scan,
    "conditional": infer_conditional,
    "opt-barrier": infer_identity,
    "collective-permute": infer_identity,
    "all-reduce": infer_all_reduce,
    "all-reduce-start": infer_all_reduce,
    "all-reduce-done": infer_async_done,
    "all-gather-start": infer_all_gather_start,
    "all-gather-done": infer_async_done,
    "collective-permute-start": infer_collective_permute_start,
    "collective-permute-done": infer_async_done,
    "collective-broadcast": infer_identity,
    "all-gather": infer_all_gather,
    "reduce-scatter": infer_reduce_scatter,
    "all-to-all": infer_all_to_all,
    "replica-id": infer_u32_scalar,
    "partition-id": infer_u32_scalar,
    "after-all": infer_after_all,
    "rng-bit-generator": infer_rng_bit_generator,
    "rng": infer_rng,
    "rng-get-and-update-state": infer_rng_get_and_update_state,
    "parameter": infer_declared,
    "custom-call": infer_declared,
    "constant": infer_constant,
    "iota": infer_iota,
}
