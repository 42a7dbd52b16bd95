"""Every opcode and fusion pattern of ``tests/backends/op_cases.py`` on the CPU backend, compared
with the reference interpreter on fake arguments (three seeds)."""

from __future__ import annotations

import pytest

from tests.backends.backend_test_utils import assert_same, run_both
from tests.backends.op_cases import all_cases

CASES = all_cases()


def tolerance(name: str) -> dict[str, float] | None:
    """Low-precision reductions: the backend adds in a different order (vectorised, tree-shaped)
    than the interpreter, and every f16/bf16 add rounds, so sums of ~100 terms differ by a few ulp
    of the result."""
    if name.startswith("reduce") and name.endswith("f16"):
        return {"rtol": 2e-2, "atol": 0.25 if name.endswith("bf16") else 0.1}
    return None


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name,text", CASES, ids=[name for name, _ in CASES])
def test_cpu_matches_interpreter(name: str, text: str, seed: int) -> None:
    got, want = run_both(text, None, "cpu", seed=seed)
    assert_same(got, want, tolerance(name), name)
