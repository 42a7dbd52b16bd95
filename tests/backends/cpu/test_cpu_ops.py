"""Every opcode and fusion pattern of ``tests/backends/op_cases.py`` on the CPU backend, compared
with the reference interpreter on fake arguments (three seeds)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.backends.backend_test_utils import assert_same, run_both
from tests.backends.op_cases import all_cases

CASES = all_cases()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name,text", CASES, ids=[name for name, _ in CASES])
def test_cpu_matches_interpreter(name: str, text: str, seed: int) -> None:
    """Within the rounding-error bound of each result's terms (a sum of 100 bf16 values added in
    another order than the interpreter's may be off by many ulp of the result, and must be)."""
    got, want = run_both(text, None, "cpu", seed=seed)
    assert_same(got, want, None, name)


def test_bf16_nan_made_by_arithmetic_is_the_canonical_nan() -> None:
    """Found by the random modules: abs of a bf16 NaN with a payload (the bits of s16 -3) comes out
    as the canonical quiet NaN, as the interpreter's (ml_dtypes', Eigen's) f32 -> bf16 makes it."""
    text = """HloModule m
ENTRY main {
  p0 = s16[4] parameter(0)
  n = s16[4] negate(p0)
  b = bf16[4] bitcast-convert(n)
  a = bf16[4] abs(b)
  ROOT r = s16[4] bitcast-convert(a)
}"""
    x = np.array([3, -32707, 5, -3], np.int16)
    got, want = run_both(text, [x], "cpu")
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0][0] == 0x7FC0
