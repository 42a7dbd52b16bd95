"""Oracle for ``control_flow``: the loops, branches and called computations re-written as
plain Python control flow over NumPy arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tests.hlo.corpus_oracles.common import F32, Oracle, normal, wrapped

# One run per branch-index case: below range, each branch, above range.
_INDICES = [-1, 0, 1, 2, 7]


def control_flow_inputs(rng: np.random.Generator, run: int) -> list[np.ndarray]:
    return [normal(rng, 4), normal(rng, 4), np.array(run % 2 == 0), np.array(_INDICES[run], np.int32),
            np.array(rng.standard_normal(), F32), rng.integers(-100, 100, 3).astype(np.int32),
            rng.integers(-50000, 50000, (2, 3)).astype(np.int32)]


def control_flow_expected(args: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    x, y, p, idx, s, k, n = args
    acc, trips = np.zeros(4, F32), 0
    while trips < 5:  # float.body: acc = acc * 0.5 + x
        acc, trips = acc * np.float32(0.5) + x, trips + 1
    count, v = 4, [int(e) for e in k]
    while count > 0:  # int.body: v = 2 * v + count (before the decrement), count -= 1
        v, count = [2 * e + count for e in v], count - 1
    branch = int(idx) if 0 <= int(idx) < 3 else 2
    called = s * x + y
    return {
        "loop.trips": np.array(trips, np.int32), "loop.acc": acc, "loop.ints": wrapped(v, np.int32),
        "chosen": x * y if p else -y, "branched": [x + x, -y, x * np.float32(3)][branch], "called": called,
        "mapped": x * y - x, "squares": wrapped([int(e) ** 2 for e in n.ravel()], np.int32).reshape(2, 3),
        "nested.p": np.array(bool(p)),
    }


ORACLES = {"control_flow": Oracle(control_flow_inputs, control_flow_expected, runs=len(_INDICES))}
