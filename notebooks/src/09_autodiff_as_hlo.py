# Source of notebooks/09_autodiff_as_hlo.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 09 · Autodiff as HLO: reading a gradient module
#
# XLA itself knows nothing about derivatives. A framework (JAX, TensorFlow, here
# `xla_teach`) differentiates your function *while tracing it* and hands XLA an
# ordinary HLO module that computes the gradient. So a gradient can be read, dumped,
# optimized and fused like any other program -- and when a gradient is slow or wrong,
# that module is where to look.
#
# How `xt.grad(f)` builds it (reverse mode):
#
# 1. trace `f` as usual, and record on a **tape** every primitive applied to a value
#    that depends on the differentiated argument;
# 2. start from the output's cotangent `1.0` and walk the tape **backwards**; each
#    primitive's **transpose rule** (its vector-Jacobian product) turns the cotangent of
#    its output into cotangents of its inputs -- by emitting more HLO instructions.
#
# JAX names the forward part `jvp(f)` and the backward part `transpose(jvp(f))` -- the
# transpose of the linearized (JVP) function -- and so does xla_teach, in every
# instruction's metadata. The compile explorer groups the module by these names.

# %%
import numpy as np

import xla_teach as xt
import xla_teach.numpy as xnp


def f(x):
    return xnp.sum(xnp.sin(x) * x)


x = np.linspace(-1.0, 1.0, 4, dtype=np.float32)
grad_f = xt.jit(xt.grad(f))
print("grad f(x)       :", grad_f(x))
print("cos(x)*x + sin(x):", np.cos(x) * x + np.sin(x))

# %% [markdown]
# ## 1. The gradient module, before optimization
#
# `jit(grad(f))` is a function like any other, so `lower(...).as_text("hlo")` shows its
# module. First without metadata, to read the data flow:

# %%
lowered = grad_f.lower(x)
print(lowered.module.to_text(print_metadata=False))

# %% [markdown]
# The first half is the **forward** pass, `sin(x) * x` and its `reduce`: the tape needs
# the forward values (here `sine` and `x`). The second half is the **backward** pass.
# Its `op_name` metadata says which transpose rule emitted each instruction:

# %%
def backward_table(module, prefix):
    for instr in module.entry.instructions:
        op_name = instr.metadata.op_name if instr.metadata else ""
        print(f"{instr.name:<13} {instr.opcode:<11} {op_name.removeprefix(prefix)}")


backward_table(lowered.module, "jit(grad_f)/")

# %% [markdown]
# Read it from the output backwards, as the backward pass was built:
#
# | forward primitive | its transpose rule | HLO it emitted |
# |---|---|---|
# | `reduce_sum` over axis 0: `f32[4] -> f32[]` | the cotangent is **broadcast** back to the input's shape | `broadcast` (of the seed `1.0`, a `convert`ed constant) |
# | `mul(sin(x), x)` | `d(a*b) = da*b + a*db`: each input's cotangent is the output's cotangent times the **other** input | two `multiply` |
# | `sin(x)` | times `cos(x)` | `cosine`, `multiply` |
# | `x` used twice | the cotangents of both uses are **added** | `add` |
#
# Every primitive has such a rule (in `xla_teach/frontend/autodiff_rules.py`), and each
# rule only emits primitives -- which is why `grad(grad(f))` works: the backward pass is
# itself traced and can be differentiated again.
#
# ## 2. After optimization
#
# The backward pass is built mechanically, so it is full of work a compiler removes:
# multiplying by a broadcast `1.0`, the forward `reduce` whose value `grad` throws away.

# %%
compiled = lowered.compile()
print(compiled.as_text("optimized_hlo", short_metadata=True))
for record in compiled.pass_records():
    if record.changed:
        print(f"{record.pass_name:<28} {record.instructions_before:>3} -> {record.instructions_after:>3} instructions")

# %% [markdown]
# Everything became **one loop fusion**: constant folding turned `convert(1)` into `1.0`,
# dead-code elimination removed the forward `reduce` whose value nobody uses, the
# algebraic simplifier removed the multiplies by one, and fusion put the
# forward `sine` and the backward `cosine` into the same kernel -- the forward and the
# backward pass are no longer separate. The metadata survives the passes, so each fused
# instruction still says which rule made it.
#
# ## 3. Matrices: the `dot` rule, and broadcasts become reductions
#
# A dense layer, `tanh(x @ w + b)`, shows the two rules training uses most:
#
# * `dot`: the cotangent of `w` in `y = x @ w` is `x^T @ dy` -- another `dot`, with
#   *different contracting dimensions*, often followed by a `transpose`;
# * `broadcast`: `b` of shape `[2]` was broadcast to `[4, 2]`; its cotangent is the
#   broadcast's transpose, a **sum over the broadcast dimension** (`reduce`).

# %%
def layer_loss(w, x, b):
    return xnp.sum(xnp.tanh(x @ w + b))


rng = np.random.default_rng(0)
w = rng.standard_normal((3, 2)).astype(np.float32)
xs = rng.standard_normal((4, 3)).astype(np.float32)
b = rng.standard_normal(2).astype(np.float32)
grad_layer = xt.jit(xt.grad(layer_loss, argnums=(0, 2)))  # gradients for w and b
layer_lowered = grad_layer.lower(w, xs, b)
layer_text = layer_lowered.module.to_text(print_metadata=False)
print(layer_text)
backward_table(layer_lowered.module, "jit(grad_layer_loss)/")
assert "lhs_contracting_dims={0}, rhs_contracting_dims={0}" in layer_text  # the backward dot (read on)

# %% [markdown]
# Find them in the text: `dot.1 = f32[2,3] dot(multiply.1, x), lhs_contracting_dims={0},
# rhs_contracting_dims={0}` contracts over the **batch** dimension (the forward `dot`
# contracted over the features), then `transpose` puts the result in `w`'s `[3, 2]`
# shape. `reduce.1 = f32[2] reduce(multiply.1, ...), dimensions={0}` sums the bias's
# cotangent over the batch. And `tanh`'s rule reuses the forward value:
# `d tanh = 1 - tanh^2` is the `subtract(broadcast.2, multiply(tanh, tanh))`.
#
# Checked against the closed form:

# %%
gw, gb = grad_layer(w, xs, b)
dy = 1.0 - np.tanh(xs @ w + b) ** 2
print("dL/dw matches x^T @ (1 - tanh^2):", np.allclose(gw, xs.T @ dy, atol=1e-6))
print("dL/db matches sum over the batch :", np.allclose(gb, dy.sum(axis=0), atol=1e-6))

# %% [markdown]
# The same gradient in the **compile explorer**: its graph groups the module by `op_name`, so
# the forward pass `jvp(layer_loss)` and the backward pass `transpose(jvp(layer_loss))` are
# boxes (click one to open it); click the backward `dot` for the Python line it came from, or
# step through the passes on the left to watch forward and backward instructions fuse together.

# %%
layer_lowered.compile().explore()

# %% [markdown]
# ## 4. Comparing with finite differences
#
# The classic check of any gradient: nudge one input by `±eps` and look at how the
# output moves, `(f(x + eps e_i) - f(x - eps e_i)) / 2 eps`. It is exact up to
# `O(eps^2)` truncation error plus rounding error `~ machine epsilon / eps`, so it is
# done in `float64`: xla_teach keeps NumPy's dtypes, and a `float64` argument gives an
# `f64` module.

# %%
def finite_differences(fn, x, eps=1e-6):
    fn = xt.jit(fn)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (fn(x + step) - fn(x - step)) / (2 * eps)
    return grad


def check(fn, x):
    analytic = xt.jit(xt.grad(fn))(x)
    numeric = finite_differences(fn, x)
    error = np.max(np.abs(analytic - numeric)) / max(1.0, np.max(np.abs(numeric)))
    print(f"{fn.__name__:<10} {analytic.dtype}  max relative difference {error:.1e}")
    return error


x64 = rng.standard_normal(5)  # float64


def softplus_sum(x):
    return xnp.sum(xnp.log1p(xnp.exp(x)))


def normalized(x):
    return xnp.sum(x / xnp.sqrt(xnp.sum(x * x)) * xnp.arange(5.0))


def max_sq(x):
    return xnp.max(x * x)


for fn in (f, softplus_sum, normalized, max_sq):
    assert check(fn, x64) < 1e-6

# %% [markdown]
# In `float32` the same check is far noisier, because the rounding error of the
# difference quotient is about `1e-7 / eps`: pick `eps` too small and rounding wins,
# too large and truncation does.

# %%
x32 = x64.astype(np.float32)
analytic = xt.jit(xt.grad(normalized))(x32)
epsilons = [10.0 ** -k for k in np.arange(0.5, 6.01, 0.5)]
errors = []
for eps in epsilons:
    numeric = finite_differences(normalized, x32, eps=np.float32(eps))
    errors.append(float(np.max(np.abs(analytic - numeric))))
    print(f"eps {eps:7.0e}: max |analytic - numeric| = {errors[-1]:.1e}")

# %% [markdown]
# Drawn on log-log axes, the error is the sum of two straight lines: truncation, falling as
# `eps^2` to the left, and rounding, rising as `1/eps` to the right. The best `eps` sits at
# their crossing, near the cube root of float32's epsilon (about `5e-3`).

# %%
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("matplotlib is not installed: the table above is the curve")
if plt is not None:
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.loglog(epsilons, errors, "o-", label="measured (float32)")
    top = errors[0] / epsilons[0] ** 2
    ax.loglog(epsilons, [top * e ** 2 for e in epsilons], "--", color="gray", label="truncation ~ eps^2")
    ax.loglog(epsilons, [6e-8 / e for e in epsilons], ":", color="gray", label="rounding ~ 1e-7 / eps")
    ax.set_xlabel("eps", fontsize=11)
    ax.set_ylabel("max |analytic - numeric|", fontsize=11)
    ax.set_ylim(min(errors) / 10, max(errors) * 10)
    ax.legend(fontsize=10)
    ax.set_title("finite differences in float32: the U-curve", fontsize=12)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ## Graded exercise: `autodiff_rule`
#
# This chapter prepares this exercise (docs/exercises.md). The cell copies the
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['autodiff_rule']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Read a rule.** Write `g(x) = xnp.sum(xnp.exp(x) / (1 + x * x))`, print
#    `jit(grad(g)).lower(x).as_text("hlo")`, and label each backward instruction with the
#    rule that emitted it (`transpose(div)`, `transpose(exp)`, ...). Which forward values
#    does the backward pass reuse, and which does it recompute?
# 2. **What the optimizer removes.** For `layer_loss`, count the instructions of the
#    gradient module before and after optimization, and list the passes that changed
#    it. Which instructions did the algebraic simplifier remove, and why were they
#    there at all?
# 3. **Second derivatives.** `xt.grad(xt.grad(lambda x: xnp.sum(xnp.sin(x))))` cannot
#    work directly (the inner gradient is not a scalar). Write a scalar function whose
#    second derivative is `-sin(x)`, jit it, and find the `transpose(jvp(...))` scopes
#    nested inside each other in the metadata.
# 4. **`max` is not smooth.** `max_sq` passed the finite-difference check. Build an input
#    where two elements tie for the maximum: what gradient does `grad` return, and what
#    do finite differences say? Find the instructions in the gradient module that pick
#    the winner.
# 5. **A wrong rule.** In a scratch copy, make `sin`'s rule in
#    `xla_teach/frontend/autodiff_rules.py` multiply by `-cos(x)` instead. Which check of
#    section 4 catches it, and by how much? (Undo the change afterwards.)
