"""The vector elemental emitter: "the values of instruction X at ``lanes`` consecutive indices".

The elemental emitter (:mod:`elemental_emitter`) computes one element; a loop over a row then
leaves it to LLVM's loop vectorizer to turn that scalar code into SIMD code. The vectorizer is
good at it, but it is also expensive: for every loop it tries several vector widths and
interleave counts, costs each, and emits the winner with an epilogue and a scalar remainder --
and it needs the rest of LLVM's ``-O3`` loop pipeline around it. XLA's CPU backend does not
leave reductions to it: its reduction emitter writes vector code itself (``VectorSupportLibrary``).
So does this one, for the row kernels.

The lanes run along the *minor-most* dimension of each instruction's layout, starting at the
given index -- consecutive addresses in memory::

    value(x + y,  [r, j..j+7]) = value(x, [r, j..j+7]) + value(y, [r, j..j+7])   # <8 x float> add
    value(param,  [r, j..j+7]) = one <8 x float> load from &param[r, j]
    value(broadcast(v) dims={0}, [r, j..j+7]) = splat(scalar value(v, [r]))      # same in every lane
    value(broadcast(g) dims={1}, [r, j..j+7]) = value(g, [j..j+7])               # a vector again

The math library (exp, log, tanh, erf, ...) is written once for scalars and vectors
(:class:`~xla_teach.backends.llvm.math.common.FloatOps`), so a vector ``exp`` is the same
polynomial eight lanes wide and gives bit for bit the scalar results.

Only what this module knows how to emit is accepted: :func:`vector_problem` says why an
instruction is not (a reshape or transpose under the lanes, an integer type, a trig function),
and the kernel then falls back to scalar loops and LLVM's vectorizer.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.elemental_emitter import ElementalEmitter
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex
from xla_teach.backends.llvm.ir_types import compute_type
from xla_teach.backends.llvm.loops import element_bytes, splat
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.types import PrimitiveType

VectorGenerator = Callable[[IrIndex], ir.Value]

# Element-wise opcodes whose emitters are written for vectors too (checked bit for bit against
# the scalar ones in tests/backends/llvm/test_vector_emitter.py). Not here: sine/cosine/tan (a
# table lookup per element) and power (per-element special cases in integer code).
VECTOR_UNARY = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "erf", "cbrt",
    "sqrt", "rsqrt", "abs", "negate", "floor", "ceil", "round-nearest-afz", "round-nearest-even", "sign",
})  # fmt: skip
VECTOR_BINARY = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum", "atan2", "remainder"})
_FLOATS = (PrimitiveType.F32, PrimitiveType.F64)


def lane_dimension(instr: HloInstruction) -> int:
    """The dimension the lanes run along: the minor-most one of the instruction's layout."""
    return instr.shape.minor_to_major()[0]


def is_uniform_broadcast(instr: HloInstruction) -> bool:
    """A broadcast whose value is the same in every lane: its operand does not vary along the
    lane dimension (a scalar, a row statistic, or a size-1 dimension stretched across the row)."""
    operand, lane = instr.operand(0), lane_dimension(instr)
    return (operand.shape.rank == 0 or lane not in instr.dimensions
            or operand.shape.dimensions[instr.dimensions.index(lane)] == 1)


def vector_problem(instr: HloInstruction) -> str | None:
    """Why ``instr`` cannot be computed by :class:`VectorEmitter` (None when it can), looking
    through its operands as far as they vary along the lanes."""
    shape = instr.shape
    if not shape.is_array or shape.rank == 0:
        return f"{instr.name} is not an array"
    if shape.element_type not in _FLOATS and not (shape.element_type is PrimitiveType.PRED
                                                   and instr.opcode == "compare"):
        return f"{instr.name} is {shape.element_type.name.lower()}"
    opcode = instr.opcode
    if opcode == "parameter":
        return None
    if opcode == "broadcast":
        if is_uniform_broadcast(instr):
            return None  # the same in every lane: computed once, as a scalar
        operand = instr.operand(0)
        position = instr.dimensions.index(lane_dimension(instr))
        if lane_dimension(operand) != position:
            return f"{instr.name} broadcasts a dimension of {operand.name} that is not its minor-most"
        return vector_problem(operand)
    if opcode == "compare":
        if instr.attrs.get("type") == "TOTALORDER" or instr.operand(0).shape.element_type not in _FLOATS:
            return f"{instr.name} is not an ordinary float compare"
    elif opcode == "convert":
        if instr.operand(0).shape.element_type not in _FLOATS:
            return f"{instr.name} converts from {instr.operand(0).shape.element_type.name.lower()}"
    elif opcode not in VECTOR_UNARY | VECTOR_BINARY | {"select", "copy"}:
        return f"{instr.name} ({opcode}) has no vector emitter"
    for operand in instr.operands:
        if operand.shape.rank == 0:
            continue  # the same in every lane: computed once, as a scalar
        if operand.shape.dimensions != shape.dimensions or lane_dimension(operand) != lane_dimension(instr):
            return f"{operand.name} is laid out differently from {instr.name}"
        problem = vector_problem(operand)
        if problem:
            return problem
    return None


class VectorEmitter:
    """Vector values of a fused computation's instructions; scalar values (a row's reduction, a
    broadcast scalar) come from ``scalar``, the kernel's :class:`ElementalEmitter`."""

    def __init__(self, b: ir.IRBuilder, scalar: ElementalEmitter, parameters: list[IrArray], lanes: int,
                 reassociate: bool = False) -> None:
        """``parameters[n]`` is the array fused parameter ``n`` reads."""
        self.b = b
        self.scalar = scalar
        self.parameters = parameters
        self.lanes = lanes
        self.reassociate = reassociate
        self._overrides: dict[int, VectorGenerator] = {}
        self._cache: dict[tuple[int, int, int], tuple[IrIndex, ir.Block, ir.Value]] = {}
        self._uniform: dict[int, ir.Value] = {}  # splats computed ahead of a loop (see hoist)

    def set_generator(self, instr: HloInstruction, generator: VectorGenerator) -> None:
        """Compute ``instr`` with ``generator`` from now on (a value the kernel keeps in a row cache)."""
        self._overrides[instr.unique_id] = generator

    def value_at(self, instr: HloInstruction, index: IrIndex) -> ir.Value:
        """``instr`` at ``index`` and the ``lanes - 1`` indices after it along its lane dimension."""
        key = (instr.unique_id, id(index), id(self.b.block))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is index and hit[1] is self.b.block:
            return hit[2]
        override = self._overrides.get(instr.unique_id)
        value = override(index) if override is not None else self._emit(instr, index)
        self._cache[key] = (index, self.b.block, value)
        return value

    def hoist(self, instr: HloInstruction, index: IrIndex) -> None:
        """Compute now, ahead of a loop along the lanes from ``index``, every value ``instr``'s
        vector code needs that is the same in every lane and every step of the loop -- a
        broadcast row statistic, a scalar operand -- so the loop only reads them. (LLVM's LICM
        pass would move them out of the loop; the short pipeline these kernels get has none.)
        Valid while the other dimensions of ``index`` stay as they are: one row."""
        if instr.unique_id in self._overrides or instr.opcode == "parameter":
            return
        if instr.opcode == "broadcast":
            operand = instr.operand(0)
            operand_index = IrIndex(tuple(index.dims[d] for d in instr.dimensions), operand.shape)
            if is_uniform_broadcast(instr):
                if instr.unique_id not in self._uniform:
                    self._uniform[instr.unique_id] = self._splat(self.scalar.value_at(operand, operand_index))
            else:
                self.hoist(operand, operand_index)
            return
        for operand in instr.operands:
            if operand.shape.rank == 0:
                if operand.unique_id not in self._uniform:
                    self._uniform[operand.unique_id] = self._splat_scalar(operand)
            else:
                self.hoist(operand, IrIndex(index.dims, operand.shape))

    def forget_uniform(self) -> None:
        """Drop the hoisted values (the next row computes its own)."""
        self._uniform.clear()

    def load(self, pointer: ir.Value, element: ir.Type) -> ir.Value:
        """``lanes`` elements from ``pointer`` on (aligned as one element: a row starts anywhere)."""
        vector = ir.VectorType(element, self.lanes)
        load = self.b.load(self.b.bitcast(pointer, vector.as_pointer()), typ=vector)
        load.align = element_bytes(element)
        return load

    def store(self, value: ir.Value, pointer: ir.Value) -> None:
        """Store a vector (or one element) at an element's address."""
        element = value.type.element if isinstance(value.type, ir.VectorType) else value.type
        store = self.b.store(value, self.b.bitcast(pointer, value.type.as_pointer()))
        store.align = element_bytes(element)

    def _splat(self, value: ir.Value) -> ir.Value:
        return splat(value, self.lanes, self.b)

    def _splat_scalar(self, operand: HloInstruction) -> ir.Value:
        """A rank-0 operand, computed as a scalar and put in every lane."""
        return self._splat(self.scalar.value_at(operand, IrIndex.scalar(operand.shape)))

    def _operand(self, instr: HloInstruction, i: int, index: IrIndex) -> ir.Value:
        operand = instr.operand(i)
        if operand.shape.rank == 0:
            return self._uniform.get(operand.unique_id) or self._splat_scalar(operand)
        return self.value_at(operand, IrIndex(index.dims, operand.shape))

    def _emit(self, instr: HloInstruction, index: IrIndex) -> ir.Value:
        b, opcode = self.b, instr.opcode
        ptype = instr.operand(0).shape.element_type if instr.operands else instr.shape.element_type
        if opcode == "parameter":
            array = self.parameters[instr.parameter_number]
            return self.load(array.address(b, IrIndex(index.dims, array.shape)), array.storage)
        if opcode == "broadcast":
            operand = instr.operand(0)
            operand_index = IrIndex(tuple(index.dims[d] for d in instr.dimensions), operand.shape)
            if is_uniform_broadcast(instr):
                hoisted = self._uniform.get(instr.unique_id)
                return hoisted or self._splat(self.scalar.value_at(operand, operand_index))
            return self.value_at(operand, operand_index)
        if opcode == "copy":
            return self._operand(instr, 0, index)
        if opcode == "convert":
            x = self._operand(instr, 0, index)
            target = ir.VectorType(compute_type(instr.shape.element_type), self.lanes)
            if x.type == target:
                return x
            return b.fpext(x, target) if isinstance(target.element, ir.DoubleType) else b.fptrunc(x, target)
        if opcode == "compare":
            x, y = self._operand(instr, 0, index), self._operand(instr, 1, index)
            return ops.emit_compare(b, instr.attrs["direction"], instr.attrs.get("type"), x, y, ptype)
        if opcode == "select":  # (a scalar predicate is splatted like any scalar operand)
            condition = self._operand(instr, 0, index)
            return b.select(condition, self._operand(instr, 1, index), self._operand(instr, 2, index))
        if opcode in VECTOR_UNARY:
            return ops.emit_unary(b, opcode, self._operand(instr, 0, index), ptype)
        if opcode in VECTOR_BINARY:
            x, y = self._operand(instr, 0, index), self._operand(instr, 1, index)
            return ops.emit_binary(b, opcode, x, y, ptype, reassociate=self.reassociate)
        raise NotImplementedError(f"no vector emitter for {opcode} ({instr.name}); vector_problem() says so first")
