"""The CPU sort kernel (``kernels/sort.py``) on slices big enough that several threads share
them, with keys and values moving together; oracle: NumPy's stable argsort."""

from __future__ import annotations

import numpy as np
import pytest

from xla_teach.api import compile_module

SORT_PAIRS = """HloModule s
lt {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=LT
}}
ENTRY e {{
  x = f32[{r},{n}] parameter(0)
  v = s32[{r},{n}] iota(), iota_dimension={d}
  ROOT s = (f32[{r},{n}], s32[{r},{n}]) sort(x, v), dimensions={{{d}}}, is_stable=true, to_apply=lt
}}"""


@pytest.mark.parametrize("rows,cols,dim", [(64, 2048, 1), (2048, 64, 0), (1, 5000, 1), (3, 1, 0)])
def test_keys_and_values_sort_together_stably(rows: int, cols: int, dim: int) -> None:
    executable = compile_module(SORT_PAIRS.format(r=rows, n=cols, d=dim), "cpu")
    rng = np.random.default_rng(rows + cols)
    x = rng.integers(-20, 20, (rows, cols)).astype(np.float32)  # many ties: stability matters
    keys, positions = executable.execute([x])
    order = np.argsort(x, axis=dim, kind="stable")
    np.testing.assert_array_equal(keys, np.take_along_axis(x, order, axis=dim))
    np.testing.assert_array_equal(positions, order)
