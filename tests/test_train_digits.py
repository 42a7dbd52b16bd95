"""examples/train_digits.py: the MNIST-style tutorial on scikit-learn's real digits.

Trained small (a few epochs, softmax regression mostly), it must reach 0.90 test
accuracy with every optimizer, compile its step once, compute the same step as
hand-derived NumPy, and write a well-formed Chrome trace from the command line.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_digits.py"


def _load_example():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


td = _load_example()


@pytest.fixture(scope="module")
def digits():  # type: ignore[no-untyped-def]
    return td.load_digits_split(seed=0)


def _numpy_accuracy(params, data) -> float:  # type: ignore[no-untyped-def]
    h = data.x_test
    for i, layer in enumerate(params):
        h = (np.maximum(h, 0) if i else h) @ layer["w"] + layer["b"]
    return float(np.mean(np.argmax(h, axis=1) == data.y_test))


def test_the_split_is_real_digits_and_fixed(digits) -> None:  # type: ignore[no-untyped-def]
    assert digits.x_train.shape == (1348, 64) and digits.x_test.shape == (449, 64)
    assert digits.x_train.dtype == np.float32 and digits.y_train.dtype == np.int32
    assert 0.0 <= digits.x_train.min() and digits.x_train.max() <= 1.0
    assert set(np.unique(digits.y_test)) == set(range(10))
    again = td.load_digits_split(seed=0)
    np.testing.assert_array_equal(again.y_test, digits.y_test)  # the same seed gives the same split


def test_softmax_regression_reaches_90_percent_and_compiles_once(digits) -> None:  # type: ignore[no-untyped-def]
    result = td.train(td.TrainConfig(optimizer="sgd", epochs=5), digits, log=None)
    assert result.test_accuracy >= 0.90
    # The jitted prediction agrees with plain NumPy on the trained weights.
    assert result.test_accuracy == pytest.approx(_numpy_accuracy(result.params, digits))
    info = result.step.cache_info()
    assert result.steps_run == 5 * (1348 // 64)
    assert (info.misses, info.hits, info.entries) == (1, result.steps_run - 1, 1)
    assert result.epoch_losses[-1] < 0.5 * result.epoch_losses[0]


@pytest.mark.parametrize("optimizer,hidden", [("momentum", 0), ("adam", 0), ("rmsprop", 0), ("adam", 32)],
                         ids=["momentum", "adam", "rmsprop", "mlp32-adam"])
def test_every_optimizer_reaches_90_percent(digits, optimizer: str, hidden: int) -> None:  # type: ignore[no-untyped-def]
    result = td.train(td.TrainConfig(optimizer=optimizer, hidden=hidden, epochs=5), digits, log=None)
    assert result.test_accuracy >= 0.90, (optimizer, hidden, result.epoch_losses)
    assert result.step.cache_info().misses == 1
    assert len(result.params) == (1 if hidden == 0 else 2)


def test_one_step_is_one_module_and_matches_numpy(digits) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    params = [{"w": rng.normal(0, 0.1, (64, 10)).astype(np.float32), "b": rng.normal(0, 0.1, 10).astype(np.float32)}]
    x, labels, lr = digits.x_train[:32], digits.y_train[:32], 0.5
    step = td.make_train_step(td.make_optimizer("sgd", lr))
    new_params, _, loss = step(params, (), x, labels)

    logits = x @ params[0]["w"] + params[0]["b"]
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    expected_loss = -np.mean(np.log(p[np.arange(32), labels]))
    delta = (p - np.eye(10)[labels]) / 32  # d loss / d logits
    np.testing.assert_allclose(float(loss), expected_loss, rtol=1e-5)
    np.testing.assert_allclose(new_params[0]["w"], params[0]["w"] - lr * (x.T @ delta), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(new_params[0]["b"], params[0]["b"] - lr * delta.sum(0), rtol=1e-4, atol=1e-6)

    text = step.lower(params, (), x, labels).as_text("hlo")
    assert text.count("HloModule ") == 1 and "transpose(jvp(loss_fn))" in text  # forward + backward + update
    assert text.count(" dot(") >= 2


def test_command_line_writes_a_chrome_trace_and_keeps_existing_files(tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    cmd = [sys.executable, str(EXAMPLE), "--epochs", "3", "--timeline", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(re.findall(r"^epoch +\d+ +loss \d", done.stdout, re.M)) == 3
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    assert accuracy >= 0.90
    assert "compiled 1 time(s)" in done.stdout

    events = json.loads(out.read_text())["traceEvents"]
    runs = [e for e in events if e.get("cat") == "run"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") != "run"]
    assert len(runs) == 3 * (1348 // 64) - 1  # every step after the compiling one
    assert {e["name"] for e in kernels} >= {"dot"}  # the steps' kernels are inside
    assert all(0 <= e["args"]["run"] < len(runs) for e in kernels)

    before = out.read_text()
    again = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert out.read_text() == before


def test_bad_settings_are_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert td.main(["--batch-size", "0"]) == 2
    assert "batch_size must be between 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="test_fraction"):
        td.load_digits_split(test_fraction=1.5)
    with pytest.raises(ValueError, match="hidden must be >= 0"):
        td.init_params(hidden=-1)
    with pytest.raises(ValueError, match="learning rate must be positive"):
        td.make_optimizer("adam", -1.0)
    with pytest.raises(ValueError, match="unknown optimizer"):
        td.make_optimizer("lbfgs")
