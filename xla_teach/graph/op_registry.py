"""The op registry: what every graph op computes, and whether XLA can compile it.

Each op is written **once**, in NumPy terms, as ``compute(m, *inputs, **attrs)``
where ``m`` is a NumPy-like module:

* the eager executor calls it with ``m = numpy`` -- NumPy's precompiled C loops are
  this graph runtime's "kernels", one call per op (TensorFlow's Eigen kernels);
* the XLA side calls it with ``m = xla_teach.numpy`` while tracing a cluster, so the
  same definition *emits HLO* (TensorFlow's tf2xla: every compilable op has an
  "XLA kernel" that builds XLA ops instead of computing).

Ops without an XLA kernel have ``compute=None``, a ``host`` function instead, and a
``not_compilable`` reason that MarkForCompilation reports::

    PyFunc   runs arbitrary Python on the host
    Unique   its output shape depends on the data
    AsString produces strings, which have no XLA element type

Convolutions and poolings are the exception: NumPy has no function for them, so each has an
eager kernel and an XLA kernel of its own (:mod:`~xla_teach.graph.nn_kernels`), as in TensorFlow.

Op names are TensorFlow's (``MatMul``, ``RealDiv``, ``BiasAdd``, ``ReluGrad`` ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xla_teach.graph.nn_kernels import KERNELS as NN_KERNELS
from xla_teach.graph.nn_kernels import two_kernels
from xla_teach.graph.tensor_spec import UNKNOWN, GraphError, TensorSpec

if TYPE_CHECKING:
    from xla_teach.graph.graph import Node


@dataclass(frozen=True)
class OpDef:
    name: str
    compute: Callable[..., Any] | None = None  # compute(m, *inputs, **attrs); None: no XLA kernel
    host: Callable[..., Any] | None = None  # host(*inputs, **attrs), NumPy only (not-compilable ops)
    not_compilable: str = ""  # why XLA cannot compile it ("" = it can)
    num_outputs: int = 1
    free: bool = False  # Const/Identity: count 0 towards --tf_xla_min_cluster_size
    auto_jit_level: int = 1  # the lowest --tf_xla_auto_jit level that clusters this op
    data_dependent_shape: bool = False

    @property
    def compilable(self) -> bool:
        return self.compute is not None


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    OPS[op.name] = op
    return op


def op_def(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown op type {name!r} (known: {', '.join(sorted(OPS))})") from None


def public_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """The attributes an op's compute function takes (``_Xla...`` bookkeeping removed)."""
    return {k: v for k, v in attrs.items() if not k.startswith("_")}


# ---- op definitions in NumPy terms -----------------------------------------------------------
def _matmul(m: Any, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    return m.matmul(a.T if transpose_a else a, b.T if transpose_b else b)


def _softmax(m: Any, x: Any) -> Any:
    e = m.exp(x - m.max(x, axis=-1, keepdims=True))
    return e / m.sum(e, axis=-1, keepdims=True)


def _log_softmax(m: Any, x: Any) -> Any:
    shifted = x - m.max(x, axis=-1, keepdims=True)
    return shifted - m.log(m.sum(m.exp(shifted), axis=-1, keepdims=True))


def _reduce(fn_name: str) -> Callable[..., Any]:
    def compute(m: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        axis = tuple(axis) if isinstance(axis, list) else axis
        return getattr(m, fn_name)(x, axis=axis, keepdims=keepdims)
    return compute


def _unary(fn_name: str) -> Callable[..., Any]:
    return lambda m, x: getattr(m, fn_name)(x)


def _binary(fn_name: str) -> Callable[..., Any]:
    return lambda m, x, y: getattr(m, fn_name)(x, y)


def _one_hot(m: Any, indices: Any, depth: int, dtype: Any = np.float32) -> Any:
    return (indices[..., None] == m.arange(depth)).astype(dtype)


def _argmax(m: Any, x: Any, axis: int = -1, output_type: Any = np.int32) -> Any:
    return m.argmax(x, axis=axis).astype(output_type)


def _py_func(*inputs: Any, func: Callable[..., Any], Tout: Any, shape: Any = None) -> Any:  # noqa: N803
    return np.asarray(func(*inputs), dtype=Tout)


_ELEMENTWISE_UNARY = {"Neg": "negative", "Exp": "exp", "Log": "log", "Tanh": "tanh", "Sqrt": "sqrt",
                      "Square": "square", "Abs": "abs"}
_ELEMENTWISE_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "RealDiv": "true_divide",
                       "Maximum": "maximum", "Minimum": "minimum", "Pow": "power", "Greater": "greater",
                       "Less": "less", "Equal": "equal"}

for _name, _fn in _ELEMENTWISE_UNARY.items():
    register(OpDef(_name, _unary(_fn)))
for _name, _fn in _ELEMENTWISE_BINARY.items():
    register(OpDef(_name, _binary(_fn)))
for _name, _fn in {"Sum": "sum", "Mean": "mean", "Max": "max", "Min": "min"}.items():
    register(OpDef(_name, _reduce(_fn)))

register(OpDef("Const", lambda m, value: m.asarray(value), free=True))
register(OpDef("Identity", lambda m, x: x, free=True))
register(OpDef("BiasAdd", lambda m, x, bias: x + bias))
register(OpDef("Relu", lambda m, x: m.maximum(x, m.zeros_like(x))))
register(OpDef("ReluGrad", lambda m, gradients, features: m.where(features > 0, gradients,
                                                                  m.zeros_like(gradients))))
register(OpDef("Sigmoid", lambda m, x: 1 / (1 + m.exp(-x))))
register(OpDef("Softmax", _softmax))
register(OpDef("LogSoftmax", _log_softmax))
register(OpDef("Select", lambda m, condition, x, y: m.where(condition, x, y)))
register(OpDef("Cast", lambda m, x, DstT: x.astype(DstT)))  # noqa: N803 - TensorFlow's attribute name
register(OpDef("Reshape", lambda m, x, shape: m.reshape(x, tuple(shape))))
register(OpDef("Transpose", lambda m, x, perm=None: m.transpose(x, None if perm is None else tuple(perm))))
register(OpDef("MatMul", _matmul, auto_jit_level=2))
register(OpDef("ArgMax", _argmax, auto_jit_level=2))
register(OpDef("OneHot", _one_hot, auto_jit_level=2))

# convolutions and poolings: NumPy has no function for them, so each has two kernels (nn_kernels.py)
for _name, (_eager, _xla) in NN_KERNELS.items():
    register(OpDef(_name, two_kernels(_eager, _xla), auto_jit_level=2 if _name.startswith("Conv") else 1))

register(OpDef("Placeholder", not_compilable="a graph input: its value is fed at run time"))
register(OpDef("PyFunc", host=_py_func,
               not_compilable="runs arbitrary Python code on the host; XLA has no kernel for it"))
register(OpDef("Unique", host=lambda x: np.unique(x), data_dependent_shape=True,
               not_compilable="its output shape depends on the input values (data-dependent shape); XLA needs "
               "every shape at compile time"))
register(OpDef("AsString", host=lambda x: np.asarray(x).astype(str),
               not_compilable="produces a string tensor; strings have no XLA element type"))
register(OpDef("StringToNumber", host=lambda s, out_type=np.float32: np.asarray(s).astype(out_type),
               not_compilable="reads a string tensor; strings have no XLA element type"))


# ---- static output specs ---------------------------------------------------------------------
def infer_outputs(node: Node) -> list[TensorSpec]:
    """Output specs of a new node: run its NumPy definition on zeros of the input specs
    (cheap, and by construction what the eager kernel will produce)."""
    op = OPS.get(node.op)
    if op is None:  # internal ops (_Arg, _XlaRun ...) are built with explicit specs
        raise GraphError(f"unknown op type {node.op!r} (known: {', '.join(sorted(OPS))})")
    attrs = public_attrs(node.attrs)
    if node.op == "Placeholder":
        shape = attrs.get("shape")
        return [TensorSpec(np.dtype(attrs["dtype"]), None if shape is None else tuple(shape))]
    if node.op == "PyFunc":
        shape = attrs.get("shape")
        return [TensorSpec(np.dtype(attrs["Tout"]), None if shape is None else tuple(shape))]
    specs = [t.spec for t in node.inputs]
    if op.data_dependent_shape:
        return [TensorSpec(specs[0].dtype, (None,))]
    if not all(s.fully_known for s in specs):
        return [UNKNOWN] * op.num_outputs
    zeros = [np.full(s.shape, "0" if s.dtype.kind in "OUS" else 0, dtype=s.dtype) for s in specs]  # type: ignore
    try:
        with np.errstate(all="ignore"):
            result = op.compute(np, *zeros, **attrs) if op.compute else op.host(*zeros, **attrs)  # type: ignore[misc]
    except Exception as err:  # a shape or attribute error, reported at the line that built the node
        shapes = ", ".join(str(s) for s in specs)
        raise GraphError(f"{node.op} ({node.name}) cannot take inputs ({shapes}) with attributes "
                         f"{attrs}: {err}") from None
    results = result if isinstance(result, tuple) else (result,)
    return [TensorSpec(np.asarray(r).dtype, tuple(np.shape(r))) for r in results]
