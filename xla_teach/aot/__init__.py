"""Ahead-of-time compilation (TensorFlow's ``tfcompile``): an object file, a C header, no runtime.

* :mod:`~xla_teach.aot.tfcompile` -- :func:`compile_aot`, the driver;
* :mod:`~xla_teach.aot.entry_emitter` -- the C entry function that calls the kernels;
* :mod:`~xla_teach.aot.header` -- the header and the example C program;
* :mod:`~xla_teach.aot.cli` -- ``xla-teach aot``.
"""

from xla_teach.aot.tfcompile import AotError, AotResult, compile_aot, force_loop_dots, load_module  # noqa: F401
