"""What the graph knows about a tensor before it runs: :class:`TensorSpec` (dtype and shape,
either may be unknown), and :class:`GraphError`, the graph layer's error.

These sit below both the graph IR (:mod:`~xla_teach.graph.graph`) and the op registry
(:mod:`~xla_teach.graph.op_registry`), which infers a new node's specs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class GraphError(ValueError):
    """A malformed graph or a bad reference to a node or tensor."""


@dataclass(frozen=True)
class TensorSpec:
    """What is known statically about a tensor: dtype and shape (``None`` = unknown)."""

    dtype: np.dtype | None
    shape: tuple[int | None, ...] | None

    def __str__(self) -> str:
        dtype = "?" if self.dtype is None else ("string" if self.dtype.kind in "OUS" else self.dtype.name)
        if self.shape is None:
            return f"{dtype}[?]"
        return f"{dtype}[{','.join('?' if d is None else str(d) for d in self.shape)}]"

    @property
    def fully_known(self) -> bool:
        return self.dtype is not None and self.shape is not None and None not in self.shape


UNKNOWN = TensorSpec(None, None)
