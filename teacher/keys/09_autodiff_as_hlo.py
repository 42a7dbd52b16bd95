# Answer key for notebook 09 (Autodiff as HLO) -- for teachers; not in the student kit.
# Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 09 · Autodiff as HLO -- answer key
#
# **Goals.** Students read a gradient module as the forward pass followed by the transposed
# rules (`transpose(jvp(f))` in the metadata), relate each backward instruction to the rule
# that emitted it, and check gradients against finite differences in float64.
#
# **Time.** 1 hour in class, 1.5 hours of exercises (plus `autodiff_rule`). **Where students
# stall:** the cotangent of a broadcast (a sum) and of a `dot` (another dot with other
# contracting dimensions); and finite differences in float32 (too noisy: use float64).

# %%
import numpy as np

import xla_teach as xt
import xla_teach.numpy as xnp
from xla_teach.frontend import primitives as P
from xla_teach.frontend.numpy_api import cos, multiply, negative


def op_names(module, part):
    return [(i.name, i.opcode, i.metadata.op_name) for i in module.entry.instructions
            if i.metadata and part in i.metadata.op_name]


# %% [markdown]
# ## Exercise 1: read a rule
#
# `g(x) = sum(exp(x) / (1 + x*x))`. Backward, in order: `transpose(reduce_sum)` broadcasts
# the scalar cotangent back to x's shape; `transpose(div)` gives the numerator's cotangent
# `ct / d` and the denominator's `-ct * n / d^2` (a divide, a multiply, a divide and a
# negate); `transpose(mul)` (from `x * x`) gives `ct * x` twice, added; `transpose(exp)`
# multiplies by `exp(x)`; the `add`s sum the cotangents reaching `x` by its several paths.
# Reused from the forward pass: `exp(x)` (the exp rule multiplies by its output) and the
# denominator `1 + x*x`; nothing is recomputed.

# %%
def g(x):
    return xnp.sum(xnp.exp(x) / (1 + x * x))


x = np.linspace(-1, 1, 5).astype(np.float32)
module = xt.jit(xt.grad(g)).lower(x).module
backward = op_names(module, "transpose(jvp(g))")
for name, opcode, op_name in backward:
    print(f"{name:<12} {opcode:<10} {op_name.split('transpose(jvp(g))/')[-1]}")
rules = {op_name.split("transpose(jvp(g))/")[-1].split("/")[0] for _, _, op_name in backward}
assert {"transpose(div)", "transpose(mul)", "transpose(exp)", "transpose(reduce_sum)"} <= rules
assert sum(1 for i in module.entry.instructions if i.opcode == "exponential") == 1  # exp(x) reused

# %% [markdown]
# ## Exercise 2: what the optimizer removes
#
# `layer_loss`'s gradient module has 22 instructions as traced; after the simplification
# passes 18 remain (fusion then adds fused computations). `algsimp` turned
# `transpose(dot(a, b))` into `dot(b, a)` and removed a `* 1` (the seed cotangent of the
# loss is 1, multiplied through `tanh`'s rule); `constant_folding` folded a `convert` of a
# constant; `cse` merged constants and broadcasts that several rules each made; `dce` removed
# what became unused. They were there because each rule is written locally, without knowing
# that its cotangent is a constant one, or that another rule made the same broadcast.

# %%
def layer_loss(w, x, b):
    return xnp.sum(xnp.tanh(x @ w + b))


rng = np.random.default_rng(0)
w = rng.standard_normal((3, 2)).astype(np.float32)
xs = rng.standard_normal((4, 3)).astype(np.float32)
b = rng.standard_normal(2).astype(np.float32)
lowered = xt.jit(xt.grad(layer_loss, argnums=(0, 2))).lower(w, xs, b)
records = [r for r in lowered.compile().executable.recorder.records if r.changed]
for r in records:
    print(f"{r.pass_name:<22} {r.instructions_before:3d} -> {r.instructions_after:3d}  {r.notes[:2]}")
changed = {r.pass_name for r in records}
assert {"algsimp", "constant_folding", "cse", "dce"} <= changed
assert any("transpose(dot(a, b)) -> dot(b, a)" in n for r in records if r.pass_name == "algsimp" for n in r.notes)

# %% [markdown]
# ## Exercise 3: second derivatives
#
# `grad` needs a scalar function, so differentiate a scalar: `h(x) = sin(x)` for a scalar x,
# `grad(grad(h))(x) = -sin(x)`. The metadata nests the scopes: the outer `grad` traces the
# inner one under `jvp(grad_lambda)`, whose own backward pass is
# `jvp(grad_lambda)/transpose(jvp(lambda))/...`; the outer backward is
# `transpose(jvp(grad_lambda))/...`.

# %%
second = xt.jit(xt.grad(xt.grad(lambda x: xnp.sin(x))))
assert abs(second(np.float64(0.7)) + np.sin(0.7)) < 1e-12
names = {i.metadata.op_name for i in second.lower(np.float64(0.7)).module.entry.instructions if i.metadata}
assert any("jvp(grad_lambda)/transpose(jvp(lambda))/transpose(sin)" in n for n in names)
assert any(n.startswith("jit(grad_grad_lambda)/transpose(jvp(grad_lambda))") for n in names)

# %% [markdown]
# ## Exercise 4: `max` is not smooth
#
# At `x = [2, -2, 1, 0.5, 0]` both `x0^2` and `x1^2` are the maximum. `grad` splits the
# cotangent equally between the ties: `[2, -2, 0, 0, 0]` (half of `2 x` each). Central finite
# differences agree here by symmetry: moving `x0` up raises the max, moving it down leaves
# `x1^2` as the max, and the average of the two one-sided slopes (4 and 0) is 2 -- but
# neither one-sided derivative is 2: the function has no derivative at a tie. The winners are
# picked by `transpose(reduce_max)`: a `compare` of each element with the max, a `convert`
# to 0/1, a `reduce` that counts them, and a `divide` by the count.

# %%
def max_sq(x):
    return xnp.max(x * x)


tie = np.array([2.0, -2.0, 1.0, 0.5, 0.0])
gradient = xt.jit(xt.grad(max_sq))(tie)
eps = 1e-6
central = np.array([(max((tie + eps * e) ** 2) - max((tie - eps * e) ** 2)) / (2 * eps) for e in np.eye(5)])
print("grad:", gradient, " central differences:", central.round(6))
np.testing.assert_allclose(gradient, [2, -2, 0, 0, 0])
np.testing.assert_allclose(central, gradient, atol=1e-5)
picks = [opcode for _, opcode, op_name in op_names(xt.jit(xt.grad(max_sq)).lower(tie).module, "transpose(reduce_max)")]
assert {"compare", "convert", "reduce", "divide"} <= set(picks)

# %% [markdown]
# ## Exercise 5: a wrong rule
#
# With `sin`'s rule multiplying by `-cos(x)`, the finite-difference check of `f(x) =
# sum(sin(x) * x)` fails at once: the analytic gradient is `-cos(x) x + sin(x)` instead of
# `cos(x) x + sin(x)`, off by `2 cos(x) x` -- a relative difference of order 1 against the
# check's 1e-6. (Here the rule is swapped in memory and put back; no file is edited.)

# %%
def f(x):
    return xnp.sum(xnp.sin(x) * x)


x64 = np.random.default_rng(0).standard_normal(5)
right = P.PRIMITIVES["sin"].vjp
P.PRIMITIVES["sin"].vjp = lambda cts, inputs, outputs, **params: [multiply(cts[0], negative(cos(inputs[0])))]
try:
    wrong = xt.jit(xt.grad(f))(x64)
finally:
    P.PRIMITIVES["sin"].vjp = right


def f64(v):
    return np.sum(np.sin(v) * v)


numeric = np.array([(f64(x64 + 1e-6 * e) - f64(x64 - 1e-6 * e)) / 2e-6 for e in np.eye(5)])
error = np.max(np.abs(wrong - numeric)) / max(1.0, np.max(np.abs(numeric)))
print(f"max relative difference with the wrong rule: {error:.2f}")
np.testing.assert_allclose(wrong - numeric, -2 * np.cos(x64) * x64, atol=1e-6)
assert error > 1e-2
np.testing.assert_allclose(xt.jit(xt.grad(f))(x64), numeric, atol=1e-6)  # the right rule is back
