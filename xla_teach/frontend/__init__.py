"""The front end: Python functions over arrays -> HLO modules.

The door students use is ``xla_teach.jit`` with ``import xla_teach.numpy as xnp``
and ``xla_teach.nn``; this package holds the machinery, one idea per module:

* :mod:`~xla_teach.frontend.tracer` -- tracers, trace contexts, primitives, ``bind``;
* :mod:`~xla_teach.frontend.primitives` -- the primitive set and its lowering to HLO;
* :mod:`~xla_teach.frontend.numpy_api` (+ ``_shape``, ``_reduce``, ``_linalg``),
  :mod:`~xla_teach.frontend.indexing` -- NumPy's API on tracers;
* :mod:`~xla_teach.frontend.control_flow` -- while/fori/scan/cond lowered to HLO control flow;
* :mod:`~xla_teach.frontend.jit`, :mod:`~xla_teach.frontend.stages` -- compile cache and
  stage introspection (``lower`` / ``as_text`` / ``compile``);
* :mod:`~xla_teach.frontend.autodiff` (+ ``_rules``) -- reverse mode, emitting HLO;
* :mod:`~xla_teach.frontend.nn`, :mod:`~xla_teach.frontend.random`, :mod:`~xla_teach.frontend.optimizers`;
* :mod:`~xla_teach.frontend.errors` -- ``CompilationError``; :mod:`~xla_teach.frontend.pytree`.
"""

from xla_teach.frontend import pytree  # noqa: F401
