"""Train a handwritten-digit classifier with xla_teach: the classic MNIST tutorial, re-told.

The classic tutorial trains softmax regression on MNIST with a ``jit_compile=True``
training step. Here the images are scikit-learn's digits (1797 real 8x8 handwritten
digits that ship inside the package, so nothing is downloaded), and the step is an
``xla_teach.jit`` function: the forward pass, the gradient (``value_and_grad``, itself
HLO) and the optimizer update are traced into ONE HLO module, compiled once, and run
for every batch. Every batch has the same shape (the last partial batch is dropped),
so the step never recompiles -- ``step.cache_info()`` shows one miss.

    python examples/train_digits.py                          # softmax regression, SGD
    python examples/train_digits.py --optimizer adam --hidden 64
    python examples/train_digits.py --timeline steps.json    # Chrome trace of the steps

Open the trace in ``chrome://tracing`` or https://ui.perfetto.dev: one span per
training step, and under it the kernels (fusions, dots) the compiled step ran.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import xla_teach as xt
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from xla_teach.backends.gpu.runtime import GpuUnavailableError
from xla_teach.backends.registry import BACKENDS
from xla_teach.frontend import optimizers
from xla_teach.frontend.pytree import tree_flatten, tree_unflatten
from xla_teach.tools.timeline import Timeline

NUM_CLASSES = 10
NUM_FEATURES = 64  # 8x8 pixels

# Learning rates that train each optimizer well on this data in a few epochs.
OPTIMIZERS: dict[str, tuple[Callable[[float], optimizers.Optimizer], float]] = {
    "sgd": (optimizers.sgd, 0.5),
    "momentum": (optimizers.momentum, 0.1),
    "adam": (optimizers.adam, 0.02),
    "rmsprop": (optimizers.rmsprop, 0.01),
}

Params = list[dict[str, np.ndarray]]  # one {"w", "b"} dict per dense layer


@dataclass
class Digits:
    """The digits, split once: pixels scaled to [0, 1] (float32), labels 0-9 (int32)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split(test_fraction: float = 0.25, seed: int = 0) -> Digits:
    """scikit-learn's digits (offline), shuffled with ``seed`` and split into train and test."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be between 0 and 1 (exclusive), got {test_fraction}")
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # pixel intensities are 0..16
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return Digits(x[train], y[train], x[test], y[test])


def init_params(hidden: int = 0, seed: int = 0) -> Params:
    """Softmax regression (``hidden == 0``: one dense layer, zero weights) or a 2-layer MLP
    (``hidden`` ReLU units, He-initialized so the ReLUs start out alive)."""
    if hidden < 0:
        raise ValueError(f"hidden must be >= 0 (0 means softmax regression), got {hidden}")
    if hidden == 0:
        return [{"w": np.zeros((NUM_FEATURES, NUM_CLASSES), np.float32), "b": np.zeros(NUM_CLASSES, np.float32)}]
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in ((NUM_FEATURES, hidden), (hidden, NUM_CLASSES)):
        w = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_in, fan_out)).astype(np.float32)
        layers.append({"w": w, "b": np.zeros(fan_out, np.float32)})
    return layers


def logits_fn(params: Params, x: Any) -> Any:
    """Dense layers, ReLU between them: ``x @ w + b`` becomes a ``dot`` and a broadcast ``add``."""
    for i, layer in enumerate(params):
        if i > 0:
            x = nn.relu(x)
        x = x @ layer["w"] + layer["b"]
    return x


def loss_fn(params: Params, x: Any, labels: Any) -> Any:
    """Softmax cross-entropy, averaged over the batch: ``-mean(sum(one_hot * log_softmax(logits)))``."""
    log_probs = nn.log_softmax(logits_fn(params, x))
    return -xnp.mean(xnp.sum(nn.one_hot(labels, NUM_CLASSES) * log_probs, axis=-1))


def make_optimizer(name: str, learning_rate: float | None = None) -> optimizers.Optimizer:
    """One of :data:`OPTIMIZERS`, with its default learning rate unless one is given."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r} (choose from {', '.join(OPTIMIZERS)})")
    make, default_lr = OPTIMIZERS[name]
    lr = default_lr if learning_rate is None else learning_rate
    if not lr > 0:
        raise ValueError(f"the learning rate must be positive, got {lr}")
    return make(lr)


def make_train_step(optimizer: optimizers.Optimizer, backend: str = "cpu") -> Any:
    """The training step as ONE jitted module: forward, backward (``value_and_grad``), update."""

    def train_step(params: Params, opt_state: Any, x: Any, labels: Any) -> tuple[Params, Any, Any]:
        loss, grads = xt.value_and_grad(loss_fn)(params, x, labels)
        params, opt_state = optimizer.update(grads, opt_state, params)
        return params, opt_state, loss

    return xt.jit(train_step, backend=backend)


def make_predict(backend: str = "cpu") -> Any:
    """Class predictions, jitted too (one more compilation, for the test set's shape)."""

    def predict(params: Params, x: Any) -> Any:
        return xnp.argmax(logits_fn(params, x), axis=-1)

    return xt.jit(predict, backend=backend)


class ProfiledStep:
    """Runs a jitted step's compiled executable with a :class:`Timeline` as its profiler.

    ``jit``'s call has no profiler argument, so this flattens the arguments the way
    ``jit`` does (a pytree's leaves, in order), calls ``executable.execute(leaves,
    profiler=...)``, and rebuilds the outputs' pytree. Each call is one "step" run
    in the trace, with every kernel of the step inside it.
    """

    def __init__(self, step: Any, example_args: tuple[Any, ...], example_out: Any, timeline: Timeline) -> None:
        self.executable = step.lower(*example_args).compile().executable  # (a cache hit: step has run)
        self.out_tree = tree_flatten(example_out)[1]
        self.timeline = timeline

    def __call__(self, *args: Any) -> Any:
        leaves = [np.asarray(leaf) for leaf in tree_flatten(args)[0]]
        with self.timeline.run("train_step"):
            outputs = self.executable.execute(leaves, profiler=self.timeline)
        return tree_unflatten(self.out_tree, [np.asarray(o) for o in outputs])


@dataclass
class TrainConfig:
    optimizer: str = "sgd"
    learning_rate: float | None = None  # None: the optimizer's default in OPTIMIZERS
    hidden: int = 0  # 0: softmax regression; N: a 2-layer MLP with N hidden units
    epochs: int = 10
    batch_size: int = 64
    seed: int = 0
    backend: str = "cpu"

    def check(self, num_train: int) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if not 1 <= self.batch_size <= num_train:
            raise ValueError(f"batch_size must be between 1 and the {num_train} training images, "
                             f"got {self.batch_size}")
        make_optimizer(self.optimizer, self.learning_rate)
        if self.hidden < 0:
            raise ValueError(f"hidden must be >= 0 (0 means softmax regression), got {self.hidden}")


@dataclass
class TrainResult:
    params: Params
    epoch_losses: list[float]  # mean training loss of each epoch
    test_accuracy: float
    predictions: np.ndarray  # predicted class of each test image
    step: Any  # the jitted training step (cache_info(), lower(), compile_log)
    steps_run: int
    seconds: float  # wall time of the training loop, the first step's compilation included
    timeline: Timeline | None = None


def train(config: TrainConfig, data: Digits | None = None, timeline: Timeline | None = None,
          log: Callable[[str], None] | None = print) -> TrainResult:
    """Train, printing the mean loss per epoch; returns the parameters and the test accuracy.

    With a ``timeline``, every step after the first (which compiles) is profiled.
    """
    data = data if data is not None else load_digits_split(seed=config.seed)
    config.check(len(data.x_train))
    optimizer = make_optimizer(config.optimizer, config.learning_rate)
    params = init_params(config.hidden, config.seed)
    opt_state = optimizer.init(params)
    step = make_train_step(optimizer, config.backend)
    run_step: Callable[..., Any] = step
    rng = np.random.default_rng(config.seed + 1)
    batches_per_epoch = len(data.x_train) // config.batch_size  # drop the remainder: one shape, one compile
    epoch_losses: list[float] = []
    steps_run = 0
    start = time.perf_counter()
    for epoch in range(config.epochs):
        order = rng.permutation(len(data.x_train))
        losses = []
        for i in range(batches_per_epoch):
            batch = order[i * config.batch_size:(i + 1) * config.batch_size]
            args = (params, opt_state, data.x_train[batch], data.y_train[batch])
            params, opt_state, loss = out = run_step(*args)
            steps_run += 1
            losses.append(float(loss))
            if timeline is not None and run_step is step:  # compiled: profile the steps from now on
                run_step = ProfiledStep(step, args, out, timeline)
        epoch_losses.append(float(np.mean(losses)))
        if log is not None:
            log(f"epoch {epoch + 1:3d}  loss {epoch_losses[-1]:.4f}")
    seconds = time.perf_counter() - start
    predictions = np.asarray(make_predict(config.backend)(params, data.x_test))
    accuracy = float(np.mean(predictions == data.y_test))
    return TrainResult(params, epoch_losses, accuracy, predictions, step, steps_run, seconds, timeline)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimizer", choices=list(OPTIMIZERS), default="sgd")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="default: " + ", ".join(f"{k} {lr}" for k, (_, lr) in OPTIMIZERS.items()))
    parser.add_argument("--hidden", type=int, default=0, metavar="N",
                        help="hidden ReLU units of a 2-layer MLP (default 0: softmax regression)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="for the train/test split, shuffling and init")
    parser.add_argument("--backend", choices=list(BACKENDS), default="cpu")
    parser.add_argument("--timeline", type=Path, default=None, metavar="OUT.json",
                        help="write a Chrome trace (chrome://tracing, Perfetto) of the training steps")
    parser.add_argument("--overwrite", action="store_true", help="let --timeline replace an existing file")
    args = parser.parse_args(argv)
    if args.timeline is not None and args.timeline.exists() and not args.overwrite:
        parser.error(f"{args.timeline} already exists; pass --overwrite to replace it")
    if args.timeline is not None and not args.timeline.absolute().parent.is_dir():
        parser.error(f"--timeline {args.timeline}: the folder {args.timeline.parent} does not exist")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    config = TrainConfig(args.optimizer, args.learning_rate, args.hidden, args.epochs, args.batch_size,
                         args.seed, args.backend)
    data = load_digits_split(seed=config.seed)
    try:
        config.check(len(data.x_train))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    model = "softmax regression" if config.hidden == 0 else f"MLP with {config.hidden} hidden units"
    print(f"{model}, {config.optimizer}, {len(data.x_train)} training / {len(data.x_test)} test digits, "
          f"batch {config.batch_size}, backend {config.backend}")
    timeline = Timeline(track=f"train_step ({config.backend})") if args.timeline is not None else None
    try:
        result = train(config, data, timeline)
    except GpuUnavailableError as error:  # --backend gpu on a machine without one: say so, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    info = result.step.cache_info()
    correct = int(np.sum(result.predictions == data.y_test))
    print(f"test accuracy: {result.test_accuracy:.4f} ({correct}/{len(data.y_test)})")
    print(f"{result.steps_run} steps in {result.seconds:.2f} s; the step compiled {info.misses} time(s) "
          f"({info.compile_seconds:.2f} s)" + ("" if timeline else f", {info.hits} cache hits"))
    if timeline is not None:
        path = timeline.write_chrome_trace(args.timeline, overwrite=args.overwrite)
        print(f"wrote a Chrome trace of {result.steps_run - 1} profiled steps (all but the compiling one) to {path}")
        print(timeline.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
