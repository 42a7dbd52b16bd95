"""Optimizers as pure functions over pytrees (in the style of ``optax``), so a whole
training step -- forward, gradient, update -- is one jitted HLO module.

    opt = adam(1e-3)
    state = opt.init(params)

    @xla_teach.jit
    def step(params, state, x, y):
        loss, grads = xla_teach.value_and_grad(loss_fn)(params, x, y)
        params, state = opt.update(grads, state, params)
        return params, state, loss
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach.frontend.pytree import tree_map
from xla_teach.frontend.tracer import Tracer


@dataclass(frozen=True)
class Optimizer:
    """``init(params) -> state`` and ``update(grads, state, params) -> (params, state)``."""

    name: str
    init: Callable[[Any], Any]
    update: Callable[[Any, Any, Any], tuple[Any, Any]]


def _zeros_like(params: Any) -> Any:
    return tree_map(lambda p: p * 0 if isinstance(p, Tracer) else np.zeros(np.shape(p), np.asarray(p).dtype),
                    params)


def sgd(learning_rate: float) -> Optimizer:
    """``p <- p - lr * g``."""
    def update(grads: Any, state: Any, params: Any) -> tuple[Any, Any]:
        return tree_map(lambda p, g: p - learning_rate * g, params, grads), state
    return Optimizer("sgd", lambda params: (), update)


def momentum(learning_rate: float, beta: float = 0.9) -> Optimizer:
    """Heavy ball: ``v <- beta v + g``, ``p <- p - lr v``."""
    def update(grads: Any, velocity: Any, params: Any) -> tuple[Any, Any]:
        velocity = tree_map(lambda v, g: beta * v + g, velocity, grads)
        return tree_map(lambda p, v: p - learning_rate * v, params, velocity), velocity
    return Optimizer("momentum", _zeros_like, update)


def rmsprop(learning_rate: float, decay: float = 0.9, eps: float = 1e-8) -> Optimizer:
    """``s <- decay s + (1 - decay) g^2``, ``p <- p - lr g / (sqrt(s) + eps)``."""
    def update(grads: Any, square_avg: Any, params: Any) -> tuple[Any, Any]:
        square_avg = tree_map(lambda s, g: decay * s + (1 - decay) * g * g, square_avg, grads)
        new = tree_map(lambda p, g, s: p - learning_rate * g / (s ** 0.5 + eps), params, grads, square_avg)
        return new, square_avg
    return Optimizer("rmsprop", _zeros_like, update)


def adam(learning_rate: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    """Adam with bias correction; the state is ``(step, m, v)``."""
    def init(params: Any) -> Any:
        return (np.zeros((), np.int32), _zeros_like(params), _zeros_like(params))

    def update(grads: Any, state: Any, params: Any) -> tuple[Any, Any]:
        step, m, v = state
        step = step + 1
        m = tree_map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
        v = tree_map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
        t = step.astype(np.float32) if hasattr(step, "astype") else np.float32(step)
        scale = learning_rate * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
        new = tree_map(lambda p, m_, v_: p - scale * m_ / (v_ ** 0.5 + eps), params, m, v)
        return new, (step, m, v)
    return Optimizer("adam", init, update)
