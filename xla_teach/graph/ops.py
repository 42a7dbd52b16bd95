"""Building graphs with NumPy's names: ``import xla_teach.graph.ops as gops``.

Each function adds one node to the default graph and returns its output tensor;
the node's op type is TensorFlow's (``gops.matmul`` adds a ``MatMul``, ``x + y``
an ``Add``). Nothing is computed while building::

    g = Graph()
    with g.as_default():
        x = gops.placeholder(np.float32, (64, 784), name="x")
        w = gops.constant(np.ones((784, 10), np.float32), name="w")
        logits = gops.matmul(x, w)                 # MatMul
        probs = gops.softmax(logits)               # Softmax
        n = gops.py_func(count, [probs], np.int32) # PyFunc: not compilable

:func:`function_to_graph` records a whole Python function: it creates one
placeholder per parameter and calls the function on them.

Like TensorFlow, binary ops want both inputs of one dtype; a Python number is
turned into a ``Const`` of the other input's dtype.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_teach.graph.graph import Graph, GraphError, Tensor, default_graph


def _node(op: str, inputs: Sequence[Tensor], name: str | None = None, **attrs: Any) -> Tensor:
    return default_graph().add_node(op, inputs, attrs, name=name).output(0)


def _as_tensor(value: Any, like: Tensor | None = None) -> Tensor:
    if isinstance(value, Tensor):
        return value
    dtype = like.dtype if like is not None and like.dtype is not None else None
    return constant(np.asarray(value, dtype=dtype))


def _binary(op: str, x: Any, y: Any, name: str | None = None) -> Tensor:
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise GraphError(f"{op}: at least one input must be a graph tensor")
    like = x if isinstance(x, Tensor) else y
    a, b = _as_tensor(x, like), _as_tensor(y, like)
    if a.dtype is not None and b.dtype is not None and a.dtype != b.dtype:
        raise GraphError(f"{op}: inputs have different dtypes ({a.name}: {a.dtype}, {b.name}: {b.dtype}); "
                         "insert gops.cast(...) (graph ops do not promote types, as in TensorFlow)")
    return _node(op, [a, b], name)


# ---- sources --------------------------------------------------------------------------------
def placeholder(dtype: Any, shape: Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """A graph input, fed at run time (``session.run(..., feed_dict={"x": array})``)."""
    return _node("Placeholder", [], name or "Placeholder", dtype=np.dtype(dtype),
                 shape=None if shape is None else tuple(shape))


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Tensor:
    return _node("Const", [], name or "Const", value=np.asarray(value, dtype=dtype))


def identity(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Identity", [x], name)


# ---- elementwise ----------------------------------------------------------------------------
def add(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Add", x, y, name)


def subtract(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Sub", x, y, name)


def multiply(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Mul", x, y, name)


def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("RealDiv", x, y, name)


def maximum(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Maximum", x, y, name)


def minimum(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Minimum", x, y, name)


def power(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Pow", x, y, name)


def greater(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Greater", x, y, name)


def less(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Less", x, y, name)


def equal(x: Any, y: Any, name: str | None = None) -> Tensor:
    return _binary("Equal", x, y, name)


def bias_add(x: Tensor, bias: Tensor, name: str | None = None) -> Tensor:
    return _binary("BiasAdd", x, bias, name)


def negative(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Neg", [x], name)


def exp(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Exp", [x], name)


def log(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Log", [x], name)


def tanh(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Tanh", [x], name)


def sqrt(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Sqrt", [x], name)


def square(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Square", [x], name)


def abs(x: Tensor, name: str | None = None) -> Tensor:  # noqa: A001 - NumPy's name
    return _node("Abs", [x], name)


def relu(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Relu", [x], name)


def relu_grad(gradients: Tensor, features: Tensor, name: str | None = None) -> Tensor:
    """``gradients`` where ``features > 0``, else 0 (the backward pass of ``relu``)."""
    return _node("ReluGrad", [gradients, features], name)


def sigmoid(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Sigmoid", [x], name)


def softmax(x: Tensor, name: str | None = None) -> Tensor:
    return _node("Softmax", [x], name)


def log_softmax(x: Tensor, name: str | None = None) -> Tensor:
    return _node("LogSoftmax", [x], name)


def where(condition: Tensor, x: Any, y: Any, name: str | None = None) -> Tensor:
    like = x if isinstance(x, Tensor) else y
    return _node("Select", [condition, _as_tensor(x, like), _as_tensor(y, like)], name)


def cast(x: Tensor, dtype: Any, name: str | None = None) -> Tensor:
    return _node("Cast", [x], name, DstT=np.dtype(dtype))


# ---- shapes, reductions, products --------------------------------------------------------------
def reshape(x: Tensor, shape: Sequence[int], name: str | None = None) -> Tensor:
    return _node("Reshape", [x], name, shape=tuple(shape))


def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str | None = None) -> Tensor:
    return _node("Transpose", [x], name, perm=None if axes is None else tuple(axes))


def _reduction(op: str, x: Tensor, axis: Any, keepdims: bool, name: str | None) -> Tensor:
    return _node(op, [x], name, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)


def sum(x: Tensor, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:  # noqa: A001
    return _reduction("Sum", x, axis, keepdims, name)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
    return _reduction("Mean", x, axis, keepdims, name)


def max(x: Tensor, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:  # noqa: A001
    return _reduction("Max", x, axis, keepdims, name)


def min(x: Tensor, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:  # noqa: A001
    return _reduction("Min", x, axis, keepdims, name)


def argmax(x: Tensor, axis: int = -1, name: str | None = None) -> Tensor:
    return _node("ArgMax", [x], name, axis=axis, output_type=np.dtype(np.int32))


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           name: str | None = None) -> Tensor:
    return _node("MatMul", [a, b], name, transpose_a=transpose_a, transpose_b=transpose_b)


def one_hot(indices: Tensor, depth: int, dtype: Any = np.float32, name: str | None = None) -> Tensor:
    return _node("OneHot", [indices], name, depth=int(depth), dtype=np.dtype(dtype))


# ---- convolution and pooling (xla_teach.graph.nn_kernels), NHWC images and HWIO filters -----------
def _four(v: int | Sequence[int]) -> tuple[int, ...]:
    """TensorFlow's ``[1, h, w, 1]`` from an int, a pair, or the four numbers."""
    if isinstance(v, int):
        return (1, v, v, 1)
    v = tuple(int(x) for x in v)
    return (1, *v, 1) if len(v) == 2 else v


def conv2d(x: Tensor, filters: Tensor, strides: int | Sequence[int] = 1, padding: str = "VALID",
           name: str | None = None) -> Tensor:
    return _node("Conv2D", [x, filters], name, strides=_four(strides), padding=padding)


def conv2d_backprop_input(input_sizes: Sequence[int], filters: Tensor, out_backprop: Tensor,
                          strides: int | Sequence[int] = 1, padding: str = "VALID", name: str | None = None) -> Tensor:
    return _node("Conv2DBackpropInput", [filters, out_backprop], name, input_sizes=tuple(int(s) for s in input_sizes),
                 strides=_four(strides), padding=padding)


def conv2d_backprop_filter(x: Tensor, filter_sizes: Sequence[int], out_backprop: Tensor,
                           strides: int | Sequence[int] = 1, padding: str = "VALID", name: str | None = None) -> Tensor:
    return _node("Conv2DBackpropFilter", [x, out_backprop], name, filter_sizes=tuple(int(s) for s in filter_sizes),
                 strides=_four(strides), padding=padding)


def max_pool(x: Tensor, ksize: int | Sequence[int], strides: int | Sequence[int], padding: str = "VALID",
             name: str | None = None) -> Tensor:
    return _node("MaxPool", [x], name, ksize=_four(ksize), strides=_four(strides), padding=padding)


def max_pool_grad(orig_input: Tensor, orig_output: Tensor, grad: Tensor, ksize: int | Sequence[int],
                  strides: int | Sequence[int], padding: str = "VALID", name: str | None = None) -> Tensor:
    return _node("MaxPoolGrad", [orig_input, orig_output, grad], name, ksize=_four(ksize),
                 strides=_four(strides), padding=padding)


# ---- host ops (not compilable) -------------------------------------------------------------------
def py_func(func: Callable[..., Any], inputs: Sequence[Tensor], Tout: Any,  # noqa: N803 - TF's name
            shape: Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """Call ``func`` on the inputs' NumPy values at run time (TensorFlow's ``tf.py_function``)."""
    return _node("PyFunc", list(inputs), name, func=func, Tout=np.dtype(Tout),
                 shape=None if shape is None else tuple(shape))


def unique(x: Tensor, name: str | None = None) -> Tensor:
    """The sorted distinct values of ``x`` -- how many there are depends on the data."""
    return _node("Unique", [x], name)


def as_string(x: Tensor, name: str | None = None) -> Tensor:
    return _node("AsString", [x], name)


def string_to_number(s: Tensor, out_type: Any = np.float32, name: str | None = None) -> Tensor:
    return _node("StringToNumber", [s], name, out_type=np.dtype(out_type))


# ---- recording a Python function ----------------------------------------------------------------
def function_to_graph(fn: Callable[..., Any], *specs: tuple[Sequence[int], Any],
                      graph: Graph | None = None) -> tuple[Graph, list[Tensor]]:
    """Record ``fn`` as a graph: one placeholder per parameter, ``specs`` giving
    ``(shape, dtype)`` for each; returns the graph and the output tensors.

    ::

        g, (y,) = function_to_graph(lambda x, w: [gops.relu(x @ w)], ((8, 4), np.float32),
                                    ((4, 2), np.float32))
    """
    graph = graph or Graph(getattr(fn, "__name__", "graph").replace("<lambda>", "lambda"))
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    if len(names) != len(specs):
        names = [f"arg{i}" for i in range(len(specs))]
    with graph.as_default():
        args = [placeholder(dtype, shape, name=n) for n, (shape, dtype) in zip(names, specs, strict=True)]
        out = fn(*args)
    outputs = list(out) if isinstance(out, (list, tuple)) else [out]
    for t in outputs:
        if not isinstance(t, Tensor):
            raise GraphError(f"function_to_graph: {getattr(fn, '__name__', 'fn')} must return graph tensors, "
                             f"got {type(t).__name__}")
    return graph, outputs


# ---- NumPy-style operators on graph tensors ----------------------------------------------------
def _attach_operators() -> None:
    """``x + y``, ``x @ w``, ``-x``, ``x > y``, ``x.T`` ... on a :class:`Tensor` add the nodes the
    functions above add (JAX attaches its array methods the same way, from its NumPy layer)."""
    binary = {"add": add, "sub": subtract, "mul": multiply, "truediv": divide, "matmul": matmul}
    for name, fn in binary.items():
        setattr(Tensor, f"__{name}__", lambda self, other, fn=fn: fn(self, other))
        if name != "matmul":
            setattr(Tensor, f"__r{name}__", lambda self, other, fn=fn: fn(other, self))
    Tensor.__neg__ = lambda self: negative(self)  # type: ignore[method-assign]
    Tensor.__gt__ = lambda self, other: greater(self, other)  # type: ignore[method-assign]
    Tensor.__lt__ = lambda self, other: less(self, other)  # type: ignore[method-assign]
    Tensor.T = property(lambda self: transpose(self))  # type: ignore[attr-defined]


_attach_operators()
