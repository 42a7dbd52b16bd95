"""Oracle for ``tuple_constants``: the tuple literals' elements written out as NumPy arrays,
and the doubling loop as a Python loop."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tests.hlo.corpus_oracles.common import BF16, F32, Oracle, normal


def tuple_constants_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    return [normal(rng, 3), rng.integers(0, 2, 2).astype(bool)]


def tuple_constants_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, p = args
    trips, v = 0, np.array([0.5, 0.25, 2], F32)
    while trips < 3:  # double.body: v = v + v
        trips, v = trips + 1, v + v
    return {
        "shifted": x + np.array([1.5, -np.inf, np.nan], F32),
        "masked": p & np.array([True, False]),
        "widened": np.array([3.141, -0.0]).astype(BF16).astype(F32),
        "loop.v": v,
        "product": np.array(7 * trips, np.int32),
    }


ORACLES = {"tuple_constants": Oracle(tuple_constants_inputs, tuple_constants_expected, runs=2)}
