"""``xla_teach.numpy`` -- NumPy's API, traced to HLO. Use as ``import xla_teach.numpy as xnp``.

Inside ``xla_teach.jit`` the functions build HLO; outside they run eagerly (each call
compiled for the interpreter). See ``docs/frontend.md`` for the semantics and the
differences from NumPy.
"""

import numpy as _np

from xla_teach.frontend.control_flow import cond, fori_loop, scan, switch, while_loop  # noqa: F401
from xla_teach.frontend.indexing import (  # noqa: F401
    at,
    dynamic_slice,
    dynamic_update_slice,
    take,
    take_along_axis,
)
from xla_teach.frontend.numpy_api import *  # noqa: F401,F403
from xla_teach.frontend.numpy_api import (  # noqa: F401
    abs,
    absolute,
    arange,
    argwhere,
    around,
    asarray,
    astype,
    broadcast_arrays,
    broadcast_to,
    empty,
    flatnonzero,
    nonzero,
    one_hot,
    result_type,
    round,
    unique,
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
    average,
    cumprod,
    cumsum,
    max,
    mean,
    min,
    prod,
    sort,
    std,
    sum,
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
    repeat,
    reshape,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    vstack,
)
from xla_teach.frontend.tracer import Tracer as ndarray  # noqa: F401  (isinstance checks inside jit)

bool_ = _np.bool_
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
from ml_dtypes import bfloat16  # noqa: E402,F401

pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None
dtype = _np.dtype
