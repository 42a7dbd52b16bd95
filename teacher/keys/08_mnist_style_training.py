# Answer key for notebook 08 (Training a digit classifier) -- for teachers; not in the student
# kit. Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 08 · Training with a jit-compiled step -- answer key
#
# **Goals.** Students see a whole training step (forward, gradient, update) as one compiled
# module, train it, and compare eager and compiled execution on a timeline.
#
# **Time.** 1 hour in class, 1.5 hours of exercises. **Where students stall:** the pytree of
# parameters (the executable's arguments are its leaves, in order), and reading a Chrome
# trace (open it in Perfetto, one row per track).

# %%
import numpy as np
from sklearn.datasets import load_digits

import xla_teach as xt
import xla_teach.nn as nn
import xla_teach.numpy as xnp
from xla_teach.frontend import optimizers

digits = load_digits()
images, labels = (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int32)
order = np.random.default_rng(0).permutation(len(images))
test, train = order[:450], order[450:]
x_train, y_train, x_test, y_test = images[train], labels[train], images[test], labels[test]


def mlp_loss(params, x, y):
    hidden = nn.relu(x @ params["w1"] + params["b1"])
    log_probs = nn.log_softmax(hidden @ params["w2"] + params["b2"])
    return -xnp.mean(xnp.sum(nn.one_hot(y, 10) * log_probs, axis=-1))


def make_step(loss_fn, optimizer):
    @xt.jit
    def step(params, opt_state, x, y, *extra):
        loss, grads = xt.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = optimizer.update(grads, opt_state, params)
        return params, opt_state, loss

    return step


def mlp_params(hidden=64, seed=0):
    rng = np.random.default_rng(seed)
    return {"w1": (rng.standard_normal((64, hidden)) * np.sqrt(2 / 64)).astype(np.float32),
            "b1": np.zeros(hidden, np.float32),
            "w2": (rng.standard_normal((hidden, 10)) * np.sqrt(1 / hidden)).astype(np.float32),
            "b2": np.zeros(10, np.float32)}


def train(step, params, opt_state, epochs, batch=64, keep_last=False):
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(epochs):
        perm = rng.permutation(len(x_train))
        stops = range(0, len(x_train), batch) if keep_last else range(0, len(x_train) - batch + 1, batch)
        for start in stops:
            b = perm[start:start + batch]
            params, opt_state, loss = step(params, opt_state, x_train[b], y_train[b])
            losses.append(float(loss))
    return params, losses


def test_accuracy(params):
    hidden = np.maximum(x_test @ params["w1"] + params["b1"], 0)
    return float(np.mean(np.argmax(hidden @ params["w2"] + params["b2"], axis=1) == y_test))


# %% [markdown]
# ## Exercise 1: a hidden layer
#
# A 64-unit ReLU layer lifts the test accuracy from about 0.95 (softmax regression) to about
# 0.97. The optimized step has more kernels (three more dots: the second layer's forward
# product and the backward products through it). The ReLU's gradient is a mask, `h > 0` (a
# `compare` on the [batch, hidden] activations), times the incoming gradient. It is computed
# once, in the epilogue of the product that brings the gradient back through `w2` (a kOutput
# fusion); `w1`'s gradient dot and the reduction of `b1`'s gradient over the batch read it from
# memory. A dot reads its operands from memory anyway, so recomputing the mask inside the
# reduction as well would only add work.

# %%
adam = optimizers.adam(0.01)
params = mlp_params()
step = make_step(mlp_loss, adam)
params, losses = train(step, params, adam.init(params), epochs=20)
accuracy = test_accuracy(params)
print(f"test accuracy with a 64-unit hidden layer: {accuracy:.3f}")
assert accuracy >= 0.95
compiled = step.lower(mlp_params(), adam.init(mlp_params()), x_train[:64], y_train[:64]).compile()
module = compiled.executable.module
kernels = [i for i in module.entry.instructions
           if i.opcode not in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")]
relu_grad = {i.name: i.fusion_kind for i in kernels if i.opcode == "fusion"
             and any(j.opcode == "compare" and j.operand(0).shape.dimensions == (64, 64)
                     for j in i.fused_computation.instructions)}
print(len(kernels), "kernels; the ReLU's gradient mask is in", relu_grad)
assert list(relu_grad.values()) == ["kOutput"]

# %% [markdown]
# ## Exercise 2: batch size
#
# Eager/compiled falls as the batch grows: at 8 images each op's arithmetic is a fraction of a
# microsecond, so an eager step is dozens of fixed costs (one per op) against the compiled
# step's one; at 1024 the matrix products and elementwise passes dominate the *busy* column of
# both tracks, so the fixed costs matter less and fusion's saved traffic is what remains of the
# gap. (Measured; the numbers depend on the machine.)
#
# ## Exercise 3: recompilation
#
# With the last, smaller batch kept, each epoch calls the step with two shapes: the cache
# shows 2 misses (one per shape) and the compile log two entries; every later call is a hit.
# On an accelerator a compile can take seconds to minutes, paid again for every new shape:
# pad the last batch or drop it.

# %%
sgd = optimizers.sgd(0.5)
ragged_step = make_step(mlp_loss, sgd)
train(ragged_step, mlp_params(), sgd.init(mlp_params()), epochs=2, keep_last=True)
info = ragged_step.cache_info()
print(info, f"(the training set has {len(x_train)} images: {len(x_train) % 64} in the last batch)")
assert info.misses == 2 and len(x_train) % 64 != 0

# %% [markdown]
# ## Exercise 4: read the trace
#
# The longest kernel of the compiled step is one of the `dot`s (the weight gradient or the
# forward product: the only work that grows with batch x width x width); its line in
# `compiled.as_text("optimized_hlo")` names its operands, and it holds no other instruction
# (the CPU backend keeps dots in their own kernel, with an epilogue at most). Measured in
# Perfetto; no assert here.
#
# ## Exercise 5: learning rate
#
# At 0.05 the loss falls slowly, at 0.5 steadily; at 5 it falls fastest at first but jumps
# about from batch to batch (spikes to several times the starting loss). None of them blows
# up to infinity: the gradient of softmax cross-entropy with respect to the logits is
# `softmax - one_hot`, each entry between -1 and 1, so with inputs in [0, 1] a step cannot
# grow without bound -- a large rate makes the loss noisy, not infinite (a squared error would
# diverge). A learning rate passed as an *argument* is a traced value: changing it does not
# recompile (the cache key is shapes and dtypes, not values); only a Python float baked into
# the function (or a static argument) would.

# %%
def softmax_loss(params, x, y):
    return -xnp.mean(xnp.sum(nn.one_hot(y, 10) * nn.log_softmax(x @ params["w"] + params["b"]), axis=-1))


@xt.jit
def sgd_step(params, x, y, rate):
    loss, grads = xt.value_and_grad(softmax_loss)(params, x, y)
    return {k: params[k] - rate * grads[k] for k in params}, loss


curves = {}
for rate in (0.05, 0.5, 5.0):
    params = {"w": np.zeros((64, 10), np.float32), "b": np.zeros(10, np.float32)}
    curves[rate] = []
    for _ in range(3):
        for i in range(0, len(x_train) - 63, 64):
            params, loss = sgd_step(params, x_train[i:i + 64], y_train[i:i + 64], np.float32(rate))
            curves[rate].append(float(loss))
for rate, curve in curves.items():
    print(f"rate {rate}: first-epoch mean {np.mean(curve[:26]):.2f}, last-epoch mean {np.mean(curve[-26:]):.2f}, "
          f"largest {max(curve):.2f}")
assert np.mean(curves[0.5][-26:]) < np.mean(curves[0.05][-26:])
assert all(np.isfinite(curve).all() for curve in curves.values())
assert max(curves[5.0][5:]) > max(curves[0.5][5:])  # the large rate is the jumpy one
assert sgd_step.cache_info().misses == 1
