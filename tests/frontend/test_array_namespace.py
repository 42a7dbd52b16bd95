"""A traced array's operators and methods come from ``xla_teach.numpy``, which registers them
with the tracer (the core never imports the NumPy layer); ``import xla_teach`` alone must be
enough for them to work, and ``x.__array_namespace__()`` names that module (the array API
standard's hook)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import numpy as np
import xla_teach

def f(x):
    assert x.__array_namespace__() is xla_teach.numpy
    return (x @ x.T)[0].at[1].set(7.0).sum() + x.mean()

x = np.arange(6, dtype=np.float32).reshape(2, 3)
want = (x @ x.T)[0].copy()
want[1] = 7.0
print(float(xla_teach.jit(f)(x)), float(want.sum() + x.mean()))
"""


def test_import_xla_teach_alone_gives_traced_arrays_their_operators() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got, want = map(float, run.stdout.split())
    assert got == want
