"""Every module XLA writes runs: XLA CPU's own optimized HLO of ordinary JAX programs (its
fusions -- a scatter as a fusion root --, its ``TopK`` custom-call, bitcasts between element
types in a sort comparator, dots with batch dimensions of size 1...) parses, verifies and gives
XLA's results on the interpreter and on the CPU backend -- among them one step of each common
optimizer on a softmax regression, whose small parameters' updates XLA fuses with its own
wrapped reductions (``wrapped_reduce``, a kLoop fusion holding a reduce: the CPU backend crashed
re-fusing those), and the gradients of common layers. The modules, inputs and XLA's outputs are
in tests/data/xla_optimized (written by its generate.py with JAX 0.10.2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.backends.backend_test_utils import assert_matches_xla
from xla_teach.api import execute
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module

DATA = Path(__file__).resolve().parents[1] / "data" / "xla_optimized"
PROGRAMS = sorted(p.stem for p in DATA.glob("*.txt"))


def test_the_data_is_there() -> None:
    assert len(PROGRAMS) >= 22
    optimizers = {"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"}
    assert {f"regression_{o}_step" for o in optimizers} <= set(PROGRAMS)
    assert {"dense_grad", "layernorm_grad", "attention_grad", "embedding_grad", "cnn_train_step"} <= set(PROGRAMS)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_xla_optimized_module_gives_xlas_results(name: str, backend: str) -> None:
    text = (DATA / f"{name}.txt").read_text()
    verify_module(parse_hlo(text))
    data = np.load(DATA / f"{name}.npz")
    args = [data[f"arg{i}"] for i in range(sum(1 for k in data.files if k.startswith("arg")))]
    want = [data[f"out{i}"] for i in range(sum(1 for k in data.files if k.startswith("out")))]
    got = execute(text, args, backend)
    # Both within the rounding-error bounds of the module's terms (XLA sums in its own order).
    assert_matches_xla(got, want, parse_hlo(text), args, {"rtol": 2e-5, "atol": 2e-6}, name)
