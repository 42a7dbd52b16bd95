"""``xla_teach.numpy`` -- NumPy's API, traced to HLO. Use as ``import xla_teach.numpy as xnp``.

Inside ``xla_teach.jit`` the functions build HLO; outside they run eagerly (each call
compiled for the interpreter). See ``docs/frontend.md`` for the semantics and the
differences from NumPy.
"""

import sys as _sys

import numpy as _np

from xla_teach.frontend.control_flow import cond, fori_loop, scan, switch, while_loop  # noqa: F401
from xla_teach.frontend.indexing import AtIndexer as _AtIndexer
from xla_teach.frontend.indexing import (  # noqa: F401
    at,
    dynamic_slice,
    dynamic_update_slice,
    repeat,
    take,
    take_along_axis,
)
from xla_teach.frontend.indexing import getitem as _getitem
from xla_teach.frontend.numpy_api import *  # noqa: F401,F403
from xla_teach.frontend.numpy_api import (  # noqa: F401
    abs,
    absolute,
    arange,
    around,
    asarray,
    astype,
    broadcast_arrays,
    broadcast_to,
    empty,
    one_hot,
    result_type,
    round,
    where,
)
from xla_teach.frontend.numpy_api_linalg import dot, einsum, inner, matmul, outer, tensordot, vdot  # noqa: F401
from xla_teach.frontend.numpy_api_reduce import (  # noqa: F401
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    argwhere,
    average,
    cumprod,
    cumsum,
    flatnonzero,
    max,
    mean,
    min,
    nonzero,
    prod,
    sort,
    std,
    sum,
    unique,
    var,
)
from xla_teach.frontend.numpy_api_shape import (  # noqa: F401
    concatenate,
    expand_dims,
    flip,
    fliplr,
    flipud,
    hstack,
    moveaxis,
    pad,
    reshape,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    vstack,
)
from xla_teach.frontend.tracer import ArrayMethods as _ArrayMethods
from xla_teach.frontend.tracer import Tracer as ndarray  # noqa: F401  (isinstance checks inside jit)
from xla_teach.frontend.tracer import register_array_methods as _register_array_methods

bool_ = _np.bool_
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
from ml_dtypes import bfloat16  # noqa: E402,F401

pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None
dtype = _np.dtype

# A traced array's operators and methods (x + y, x[i], x.at[i].set(v), x.sum()) call this module.
_register_array_methods(_ArrayMethods(_sys.modules[__name__], _getitem, _AtIndexer))
