"""Must-compile semantics: what cannot be compiled raises CompilationError, naming the
operation, pointing at the user's line and suggesting the compilable alternative."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import xla_teach
import xla_teach.numpy as xnp
from tests.frontend.frontend_test_utils import run

X = np.arange(6, dtype=np.float32)


def _line_of(fn, text):
    """The absolute line number of the first source line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def python_if(x):
    if x.sum() > 0:
        return x
    return -x


def python_while(x):
    while x[0] < 10:
        x = x * 2
    return x


def to_float(x):
    return float(x.sum()) * 2


def to_int(x):
    return int(x[0])


def as_index(x):
    return [1, 2, 3][x[0].astype(np.int32)]


def unique(x):
    return xnp.unique(x)


def mask_index(x):
    return x[x > 2]


def nonzero(x):
    return xnp.nonzero(x)


def traced_shape(x):
    return xnp.zeros(x[0].astype(np.int32))


def numpy_conversion(x):
    return np.asarray(x)


def traced_slice_bound(x):
    return x[: x[0].astype(np.int32)]


def set_item(x):
    x[0] = 1.0
    return x


CASES = [
    (python_if, "if x.sum()", "bool()", "xnp.where"),
    (python_while, "while x[0]", "bool()", "while_loop"),
    (to_float, "float(x.sum())", "float()", "static"),
    (to_int, "int(x[0])", "int()", "static"),
    (as_index, "[1, 2, 3]", "Python index", "fori_loop"),
    (unique, "xnp.unique", "xnp.unique", "xnp.sort"),
    (mask_index, "x[x > 2]", "boolean mask", "xnp.where"),
    (nonzero, "xnp.nonzero", "xnp.nonzero", "size="),
    (traced_shape, "xnp.zeros", "shape", "static_argnums"),
    (numpy_conversion, "np.asarray", "NumPy array", "xla_teach.numpy"),
    (traced_slice_bound, "x[: x[0]", "slicing with a traced bound", "dynamic_slice"),
    (set_item, "x[0] = 1.0", "x[...] = value", ".at[index].set"),
]


@pytest.mark.parametrize("fn,line_text,operation,suggestion", CASES, ids=[c[0].__name__ for c in CASES])
def test_compilation_errors_name_the_operation_and_the_line(fn, line_text, operation, suggestion):
    with pytest.raises(xla_teach.CompilationError) as info:
        run(fn, X)
    err = info.value
    assert isinstance(err, ValueError)
    assert operation in err.operation
    assert suggestion in err.suggestion
    assert err.location is not None and err.location.file == __file__
    assert err.location.line == _line_of(fn, line_text)
    message = str(err)
    assert f"{__file__}:{err.location.line}" in message and "Instead:" in message


def test_data_dependent_shape_errors_explain_static_shapes():
    with pytest.raises(xla_teach.CompilationError, match="static shapes"):
        run(unique, X)


def test_escaped_tracer_is_a_compilation_error():
    leaked = []
    run(lambda x: leaked.append(x) or x, X)
    with pytest.raises(xla_teach.CompilationError, match="different trace"):
        run(lambda y: y + leaked[0], X)


def test_static_argument_fixes_the_python_if():
    f = xla_teach.jit(lambda x, flip: -x if flip else x, static_argnums=1, backend="interpreter")
    np.testing.assert_array_equal(f(X, True), -X)


def test_data_dependent_functions_run_eagerly_outside_jit():
    np.testing.assert_array_equal(xnp.unique(np.array([3, 1, 3])), [1, 3])
    np.testing.assert_array_equal(xnp.nonzero(np.array([0, 2, 0, 1]))[0], [1, 3])


def test_nonzero_with_static_size_compiles():
    mask = np.array([[0, 1, 0], [1, 1, 0]], np.float32)
    rows, cols = run(lambda m: xnp.nonzero(m, size=5, fill_value=-1), mask)
    np.testing.assert_array_equal(rows, [0, 1, 1, -1, -1])
    np.testing.assert_array_equal(cols, [1, 0, 1, -1, -1])
