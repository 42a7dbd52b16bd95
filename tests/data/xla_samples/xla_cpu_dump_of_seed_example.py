import jax
import jax.numpy as jnp
import numpy as np


def f(x, y, z):
    return jnp.sum(x + y * z)

rng = np.random.default_rng(0)
x, y, z = (rng.standard_normal(1024).astype(np.float32) for _ in range(3))
print(jax.jit(f)(x, y, z))
