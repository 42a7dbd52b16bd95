"""Explicit random keys, as in JAX: randomness is a pure function of a key.

A key is a ``uint64[2]`` array, the state of HLO's ``rng-bit-generator``
(xla_teach's Philox-4x32 stream: word 0 is the key, word 1 the counter).
Functions that need randomness take a key and never change it; make new keys
with :func:`split`. The same key gives the same numbers, on every backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_teach.frontend import dtypes
from xla_teach.frontend import primitives as P
from xla_teach.frontend.autodiff import stop_gradient
from xla_teach.frontend.numpy_api import (
    ArrayLike,
    add,
    api,
    astype,
    broadcast_to,
    cos,
    greater,
    less,
    lift,
    log,
    multiply,
    sqrt,
    subtract,
    where,
)
from xla_teach.frontend.numpy_api_shape import reshape
from xla_teach.frontend.tracer import Tracer, bind


def PRNGKey(seed: int) -> np.ndarray:  # noqa: N802 - JAX's name
    """A key from an integer seed (a NumPy ``uint64[2]``: ``[seed, 0]``)."""
    return np.asarray([int(seed) % 2**64, 0], dtype=np.uint64)


def _check_key(key: Tracer) -> Tracer:
    if key.shape != (2,) or key.dtype != np.uint64:
        raise ValueError(f"a random key is a uint64[2] array (from xla_teach.nn.PRNGKey), got {key.aval}")
    return key


@api
def random_bits(key: ArrayLike, shape: Sequence[int], dtype: Any = np.uint32) -> Tracer:
    """Raw random bits of ``shape`` (HLO ``rng-bit-generator``)."""
    k = _check_key(lift(key))
    _, bits = bind(P.rng_bit_generator_p, k, shape=tuple(shape), dtype=np.dtype(dtype))
    return bits


@api
def split(key: ArrayLike, num: int = 2) -> Tracer:
    """``num`` new independent keys (``uint64[num, 2]``) derived from ``key``."""
    words = random_bits(key, (num, 2), np.uint64)
    return words


def _largest_below(m: Tracer) -> Tracer:
    """``nextafter(m, -inf)`` in ``m``'s float dtype, from its bits. Floats are stored as
    sign and magnitude: below a positive float is the one whose bits are one less, below a
    negative one the one whose bits are one more, and below +-0 the smallest negative
    subnormal (sign bit and 1)."""
    itype = np.dtype(f"int{8 * m.dtype.itemsize}")
    bits = bind(P.bitcast_convert_p, m, dtype=itype)
    smallest_negative = np.array(np.iinfo(itype).min + 1, itype)
    below = where(greater(m, 0), subtract(bits, 1), where(less(m, 0), add(bits, 1), smallest_negative))
    return bind(P.bitcast_convert_p, below, dtype=m.dtype)


@api
def uniform(key: ArrayLike, shape: Sequence[int] = (), dtype: Any = None, minval: ArrayLike = 0.0,
            maxval: ArrayLike = 1.0) -> Tracer:
    """Floats uniform in ``[minval, maxval)``: the top 24 bits of each 32-bit word, times 2**-24,
    mapped affinely onto the bounds (Python numbers or arrays that broadcast to ``shape``).
    A value that rounds up to ``maxval`` in ``dtype`` (bfloat16 has 8 significant bits) is
    replaced by the largest ``dtype`` value below ``maxval``, as in JAX."""
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    if not dtypes.is_float(dtype):
        raise TypeError(f"uniform: dtype must be a floating type (float16, bfloat16, float32, float64), got {dtype}; "
                        "for random integers use random_bits")
    shape = tuple(int(d) for d in shape)
    bits = random_bits(key, shape, np.uint32)
    top = bind(P.shift_right_logical_p, bits, lift(np.full(shape, 8, np.uint32)))
    wide = np.float64 if dtype == np.float64 else np.float32
    low, high = astype(minval, dtype), astype(maxval, dtype)
    u = multiply(astype(top, wide), float(2.0 ** -24))
    sample = astype(add(multiply(u, subtract(astype(high, wide), astype(low, wide))), astype(low, wide)), dtype)
    sample = where(less(sample, high), sample, stop_gradient(_largest_below(high)))
    return broadcast_to(sample, shape)


@api
def normal(key: ArrayLike, shape: Sequence[int] = (), dtype: Any = None) -> Tracer:
    """Standard normal samples by the Box-Muller transform of two uniform draws."""
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    n = int(np.prod(shape, dtype=np.int64))
    u = uniform(key, (2, n))
    u1, u2 = u[0], u[1]
    radius = sqrt(multiply(-2.0, log(subtract(1.0, u1))))  # 1 - u1 is in (0, 1]
    z = multiply(radius, cos(multiply(2.0 * np.pi, u2)))
    return astype(reshape(z, tuple(shape)), dtype)


def bernoulli(key: ArrayLike, p: float, shape: Sequence[int]) -> Tracer:
    """Booleans, True with probability ``p``."""
    return less(uniform(key, shape), p)


__all__ = ["PRNGKey", "bernoulli", "normal", "random_bits", "split", "uniform"]
