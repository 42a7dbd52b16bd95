"""``xla_teach.nn``: neural-network building blocks traced to HLO (activations,
softmax family, conv2d, pooling, dropout, explicit random keys).
See :mod:`xla_teach.frontend.nn`."""

from xla_teach.frontend.nn import (  # noqa: F401
    PRNGKey,
    avg_pool,
    conv2d,
    dropout,
    elu,
    gelu,
    leaky_relu,
    log_softmax,
    logsumexp,
    max_pool,
    normal,
    one_hot,
    relu,
    sigmoid,
    silu,
    softmax,
    softplus,
    split,
    uniform,
)
