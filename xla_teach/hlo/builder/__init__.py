"""``XlaBuilder``: build HLO modules op by op, with shapes inferred as you go.

Front ends (JAX, TensorFlow, PyTorch/XLA) do not write HLO text; they call an
``XlaBuilder``. Each method adds one instruction (sometimes a few: implicit
broadcasts), infers its shape and fails early -- with a
:class:`~xla_teach.hlo.errors.ShapeError` naming the op and the operand shapes --
when the operands do not fit::

    b = XlaBuilder("axpy")
    alpha = b.parameter(0, Shape.scalar("f32"), "alpha")
    x = b.parameter(1, Shape.array("f32", (4,)), "x")
    y = b.parameter(2, Shape.array("f32", (4,)), "y")
    axpy = alpha * x + y                          # the scalar alpha is broadcast implicitly
    total = b.reduce(axpy, b.constant(np.float32(0)), b.create_scalar_computation("add", "f32"), (0,))
    module = b.build(b.tuple([axpy, total]))      # an HloModule; the root is the given op

**Implicit broadcasting** (a builder feature; HLO itself needs identical shapes):
binary ops accept a scalar with an array (the scalar is ``broadcast``), Python
numbers (constants of the other operand's type), equal-rank operands whose
differing dims are 1 (both stretch), and -- with XLA's ``broadcast_dimensions``
argument -- a lower-rank operand whose dim i lines up with dim
``broadcast_dimensions[i]`` of the other (``b.add(matrix, row, broadcast_dimensions=(1,))``).
Every case becomes explicit ``broadcast`` (and ``reshape``) instructions.

Computations called by ops (reducers, loop bodies, branches, comparators) come from
**sub-builders**: ``sub = b.create_sub_builder("add")``, build ops on ``sub``, then
``sub.build_computation()``. They live in the same module and are printed before
their callers. Ops may only use operands from their own builder.

Names: instructions are named after their opcode (``add``, ``add.1``...) by the
module's NameUniquer, unless a ``name=`` is given. Metadata: ``b.set_op_metadata()``
or ``with b.op_metadata(op_name=...):`` attaches ``OpMetadata`` to the ops built.

The method groups live in mixins: :mod:`~xla_teach.hlo.builder.elementwise`,
:mod:`~xla_teach.hlo.builder.ops`, :mod:`~xla_teach.hlo.builder.control`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xla_teach.hlo.builder.arguments import explain_argument_errors
from xla_teach.hlo.builder.base import BuilderBase, XlaOp, exact_literal
from xla_teach.hlo.builder.control import ControlFlowMixin
from xla_teach.hlo.builder.elementwise import ElementwiseMixin
from xla_teach.hlo.builder.ops import DataMovementMixin, ReductionMixin, make_padding
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.ir import HloComputation, HloModule
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType

__all__ = ["XlaBuilder", "XlaOp", "make_padding"]

# Python values (not NumPy) become these types, as XLA's ConstantR0<float>/<int32_t>/<bool>.
_PYTHON_DEFAULT_DTYPES = {bool: np.bool_, int: np.int32, float: np.float32}


def _literal(value: object, dtype: object) -> np.ndarray:
    """The constant's array: NumPy values keep their dtype; Python bools/ints/floats (and
    lists of them) become pred/s32/f32 unless ``dtype`` says otherwise."""
    if dtype is not None:
        return exact_literal(value, PrimitiveType.from_name(dtype).dtype if isinstance(dtype, str) else dtype,
                             "constant")
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    array = np.asarray(value)
    if array.dtype == np.bool_:
        return array
    if array.dtype.kind in "iu":
        return array.astype(np.int32)
    if array.dtype.kind == "f":
        return array.astype(np.float32)
    raise ShapeError("constant", [], f"cannot make a constant from {type(value).__name__} {value!r:.40}")


@explain_argument_errors
class XlaBuilder(ElementwiseMixin, DataMovementMixin, ReductionMixin, ControlFlowMixin):
    """Builds one computation; the top-level builder's becomes the module's ENTRY.

    ``XlaBuilder(name)`` makes a module called ``name`` whose entry computation is
    ``entry_computation_name`` (``main``, as in JAX's dumps).
    """

    def __init__(self, name: str, *, entry_computation_name: str = "main") -> None:
        super().__init__(name, HloModule(name), None, entry_computation_name)

    # ---- sub-builders ---------------------------------------------------------------
    def create_sub_builder(self, computation_name: str, keep_metadata: bool = False) -> XlaBuilder:
        """A builder for a computation that ops of this builder will call; with ``keep_metadata``
        its ops carry this builder's current metadata too (a loop's plumbing -- its counter, the
        slices of its inputs -- belongs to the ``scan`` that made it)."""
        sub = XlaBuilder.__new__(XlaBuilder)
        BuilderBase.__init__(sub, computation_name, self.module, self)
        if keep_metadata:
            sub.set_op_metadata(self._metadata)
        return sub

    def create_scalar_computation(self, opcode: str, element_type: PrimitiveType | str) -> HloComputation:
        """``(a: T[], b: T[]) -> T[] { opcode(a, b) }``: a reducer such as ``add`` or ``maximum``
        (XLA's ``CreateScalarAddComputation`` and friends)."""
        etype = PrimitiveType.from_name(element_type) if isinstance(element_type, str) else element_type
        sub = self.create_sub_builder(f"{opcode}_{etype.value}")
        lhs = sub.parameter(0, Shape.scalar(etype), "lhs")
        rhs = sub.parameter(1, Shape.scalar(etype), "rhs")
        return sub.build_computation(sub._binary(opcode, lhs, rhs))

    def create_scalar_comparator(self, direction: str, element_types: Sequence[PrimitiveType | str],
                                 comparison_type: str | None = None) -> HloComputation:
        """A sort comparator over ``len(element_types)`` operands that compares only the
        first operand's pair: ``(a0, b0, a1, b1, ...) -> compare(a0, b0)``."""
        types = [PrimitiveType.from_name(t) if isinstance(t, str) else t for t in element_types]
        sub = self.create_sub_builder(f"compare_{direction.lower()}")
        params = [sub.parameter(i, Shape.scalar(types[i // 2]), f"p{i}") for i in range(2 * len(types))]
        return sub.build_computation(sub.compare(params[0], params[1], direction, comparison_type))

    # ---- leaves ---------------------------------------------------------------------
    def parameter(self, parameter_number: int, shape: Shape, name: str | None = None) -> XlaOp:
        """Argument ``parameter_number`` of this computation (numbers must be 0..n-1)."""
        taken = [p.parameter_number for p in self.computation.parameter_instructions]
        if parameter_number in taken or parameter_number < 0:
            raise ShapeError("parameter", [], f"parameter number {parameter_number} is negative or already used")
        return self._emit("parameter", [], {"parameter_number": int(parameter_number)}, name=name,
                          declared_shape=shape)

    def constant(self, value: object, dtype: np.dtype | type | str | None = None, *,
                 name: str | None = None) -> XlaOp:
        """A constant. NumPy values keep their dtype (``np.float32(0)`` -> ``f32[]``); Python
        ``bool``/``int``/``float`` give pred/s32/f32; ``dtype`` (NumPy or ``"bf16"``) overrides."""
        return self._constant(_literal(value, dtype), name)

    def iota(self, shape: Shape, iota_dimension: int = 0, *, name: str | None = None) -> XlaOp:
        """``out[i...] = i[iota_dimension]`` converted to the element type."""
        return self._emit("iota", [], {"iota_dimension": int(iota_dimension)}, name=name, declared_shape=shape)

    # ---- finishing ------------------------------------------------------------------
    def get_shape(self, op: XlaOp) -> Shape:
        return self._instruction_of(op, "get_shape", 0).shape

    def _finish(self, root: XlaOp | None) -> HloComputation:
        self._check_open("build")
        root = root if root is not None else self._last
        if root is None:
            raise ShapeError("build", [], f"builder '{self.name}' has no instructions")
        self.computation.root_instruction = self._instruction_of(root, "build", 0)
        self._finished = True
        return self.computation

    def build_computation(self, root: XlaOp | None = None) -> HloComputation:
        """Finish a sub-builder; ``root`` defaults to the last op built."""
        if self.parent is None:
            raise ShapeError("build_computation", [], "the top-level builder makes a module: call build()")
        return self._finish(root)

    def build(self, root: XlaOp | None = None, *, verify: bool = True) -> HloModule:
        """Finish the top-level builder and return the module (root: the given op, else
        the last op built). Computations the entry never calls are dropped, and the
        module is verified unless ``verify=False``."""
        if self.parent is not None:
            raise ShapeError("build", [], f"'{self.name}' is a sub-builder: call build_computation()")
        entry = self._finish(root)
        self.module.entry_computation = entry
        reachable: dict[int, HloComputation] = {}
        pending = [entry]
        while pending:
            comp = pending.pop()
            if id(comp) not in reachable:
                reachable[id(comp)] = comp
                pending.extend(comp.called_computations())
        for comp in list(self.module.computations):
            if id(comp) not in reachable:
                self.module.remove_computation(comp)
        if verify:
            from xla_teach.hlo.verifier import verify_module

            verify_module(self.module)
        return self.module
