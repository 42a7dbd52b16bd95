"""``xnp`` part 4: products. Every form lowers to HLO ``dot`` with explicit
contracting and batch dimensions (XLA's ``DotGeneral``)."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

from xla_teach.frontend import primitives as P
from xla_teach.frontend.numpy_api import ArrayLike, api, broadcast_shapes, broadcast_to, multiply, promote, ravel
from xla_teach.frontend.numpy_api_reduce import sum as _sum
from xla_teach.frontend.numpy_api_shape import normalize_axis, reshape, transpose
from xla_teach.frontend.tracer import Tracer, bind


def dot_general(x: Tracer, y: Tracer, contracting: tuple[Sequence[int], Sequence[int]],
                batch: tuple[Sequence[int], Sequence[int]] = ((), ())) -> Tracer:
    """HLO ``dot``: result dims are batch, then x's free dims, then y's free dims."""
    x, y = promote(x, y)
    return bind(P.dot_general_p, x, y, contracting=(tuple(contracting[0]), tuple(contracting[1])),
                batch=(tuple(batch[0]), tuple(batch[1])))


@api
def matmul(a: ArrayLike, b: ArrayLike) -> Tracer:
    """NumPy's ``matmul``: 1-D operands are promoted to matrices and the added dim is
    removed again; leading (batch) dims broadcast."""
    x, y = promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul: an operand is a scalar (use * to multiply by a scalar)")
    if x.ndim == 1 and y.ndim == 1:
        _check(x.shape[0], y.shape[0], x, y)
        return dot_general(x, y, ((0,), (0,)))
    if y.ndim <= 2 and x.ndim >= 1:
        _check(x.shape[-1], y.shape[0], x, y)
        return dot_general(x, y, ((x.ndim - 1,), (0,)))  # (..., n, k) . (k[, m])
    if x.ndim == 1:  # (k) @ (..., k, m): as (1, k), then drop the added dim
        _check(x.shape[0], y.shape[-2], x, y)
        return reshape(matmul(reshape(x, (1, -1)), y), y.shape[:-2] + y.shape[-1:])
    _check(x.shape[-1], y.shape[-2], x, y)
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2])
    x = broadcast_to(x, batch + x.shape[-2:])
    y = broadcast_to(y, batch + y.shape[-2:])
    nb = len(batch)
    return dot_general(x, y, ((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))


def _check(k1: int, k2: int, x: Tracer, y: Tracer) -> None:
    if k1 != k2:
        raise ValueError(f"matmul: contracting dimensions differ: {x.shape} @ {y.shape} ({k1} != {k2})")


@api
def dot(a: ArrayLike, b: ArrayLike) -> Tracer:
    """NumPy's ``dot``: sum over the last axis of ``a`` and the second-to-last of ``b``."""
    x, y = promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    ky = 0 if y.ndim == 1 else y.ndim - 2
    if x.shape[-1] != y.shape[ky]:
        raise ValueError(f"dot: shapes {x.shape} and {y.shape} not aligned ({x.shape[-1]} != {y.shape[ky]})")
    return dot_general(x, y, ((x.ndim - 1,), (ky,)))


@api
def vdot(a: ArrayLike, b: ArrayLike) -> Tracer:
    return dot(ravel(a), ravel(b))


@api
def inner(a: ArrayLike, b: ArrayLike) -> Tracer:
    x, y = promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"xnp.inner: shapes {x.shape} and {y.shape} not aligned: the last dimensions differ "
                         f"({x.shape[-1]} != {y.shape[-1]})")
    return dot_general(x, y, ((x.ndim - 1,), (y.ndim - 1,)))


@api
def outer(a: ArrayLike, b: ArrayLike) -> Tracer:
    x, y = promote(ravel(a), ravel(b))
    return dot_general(reshape(x, (-1, 1)), reshape(y, (1, -1)), ((1,), (0,)))


@api
def tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[Any] = 2) -> Tracer:
    x, y = promote(a, b)
    if isinstance(axes, int):
        ax = tuple(range(x.ndim - axes, x.ndim)), tuple(range(axes))
    else:
        ax_a, ax_b = axes
        ax = ((ax_a,) if isinstance(ax_a, int) else tuple(ax_a)), ((ax_b,) if isinstance(ax_b, int) else tuple(ax_b))
    if len(ax[0]) != len(ax[1]):
        raise ValueError(f"xnp.tensordot: axes {list(ax[0])} and {list(ax[1])} have different lengths")
    ca = tuple(normalize_axis(i, x.ndim) for i in ax[0])
    cb = tuple(normalize_axis(i, y.ndim) for i in ax[1])
    for i, j in zip(ca, cb, strict=True):
        if x.shape[i] != y.shape[j]:
            raise ValueError(f"xnp.tensordot: shape mismatch for sum: axis {i} of {x.shape} has size {x.shape[i]} "
                             f"but axis {j} of {y.shape} has size {y.shape[j]}")
    return dot_general(x, y, (ca, cb))


# ---- einsum -----------------------------------------------------------------------------------
def _parse_einsum(subscripts: str, n: int) -> tuple[list[str], str]:
    spec = subscripts.replace(" ", "")
    if "." in spec:
        raise NotImplementedError("einsum with '...' is not supported; write the dimensions out")
    lhs, _, out = spec.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != n:
        raise ValueError(f"einsum: {len(inputs)} operand specs in '{subscripts}' but {n} operands given")
    for term in inputs + [out]:
        if any(c not in string.ascii_letters for c in term):
            raise ValueError(f"einsum: invalid subscript '{term}' in '{subscripts}'")
    if "->" not in spec:
        counts = {c: lhs.count(c) for c in lhs if c != ","}
        out = "".join(sorted(c for c, k in counts.items() if k == 1))
    repeated = sorted({c for c in out if out.count(c) > 1})
    if repeated:
        raise ValueError(f"xnp.einsum: output subscript '{repeated[0]}' appears more than once in '{subscripts}'; "
                         "repeated output subscripts are not supported (NumPy rejects them too)")
    return inputs, out


def _einsum_unary(t: Tracer, spec: str, keep: str) -> tuple[Tracer, str]:
    """Sum out the labels of ``t`` that are not in ``keep``."""
    if len(set(spec)) != len(spec):
        raise NotImplementedError(f"einsum: repeated label in '{spec}' (diagonals) is not supported")
    drop = tuple(i for i, c in enumerate(spec) if c not in keep)
    if drop:
        t = _sum(t, drop)
        spec = "".join(c for c in spec if c in keep)
    return t, spec


@api
def einsum(subscripts: str, *operands: ArrayLike) -> Tracer:
    """Common einsum forms (``ij,jk->ik``, ``bij,bjk->bik``, ``i,i->``, ``ij->ji``, ...);
    operands are contracted left to right, each pair with one HLO ``dot``."""
    inputs, out = _parse_einsum(subscripts, len(operands))
    ts = promote(*operands)
    for t, spec in zip(ts, inputs, strict=True):
        if t.ndim != len(spec):
            raise ValueError(f"einsum: operand of shape {t.shape} does not match subscripts '{spec}'")
    sizes: dict[str, tuple[int, int]] = {}  # label -> (size, operand number) of its first appearance
    for k, (t, spec) in enumerate(zip(ts, inputs, strict=True)):
        for c, size in zip(spec, t.shape, strict=True):
            if c in sizes and sizes[c][1] != k and sizes[c][0] != size:
                first_size, first = sizes[c]
                raise ValueError(f"xnp.einsum: operand shapes {ts[first].shape} and {t.shape} disagree on index "
                                 f"'{c}': {first_size} vs {size}")
            sizes.setdefault(c, (size, k))
    acc, acc_spec = ts[0], inputs[0]
    for i in range(1, len(ts)):
        later = "".join(inputs[i + 1:]) + out
        b, b_spec = ts[i], inputs[i]
        acc, acc_spec = _einsum_unary(acc, acc_spec, b_spec + later)
        b, b_spec = _einsum_unary(b, b_spec, acc_spec + later)
        batch = [c for c in acc_spec if c in b_spec and c in later]
        contract = [c for c in acc_spec if c in b_spec and c not in later]
        acc = dot_general(acc, b, ([acc_spec.index(c) for c in contract], [b_spec.index(c) for c in contract]),
                          ([acc_spec.index(c) for c in batch], [b_spec.index(c) for c in batch]))
        acc_spec = "".join(batch) + "".join(c for c in acc_spec if c not in batch and c not in contract) + \
            "".join(c for c in b_spec if c not in batch and c not in contract)
    acc, acc_spec = _einsum_unary(acc, acc_spec, out)
    if set(out) - set(acc_spec):
        raise ValueError(f"einsum: output labels {sorted(set(out) - set(acc_spec))} appear in no input")
    return transpose(acc, [acc_spec.index(c) for c in out])
