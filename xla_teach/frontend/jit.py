"""``jit``: trace a Python function to HLO, compile it, cache it per input signature.

    @xla_teach.jit
    def model_fn(x, y, z):
        return xnp.sum(x + y * z)

    model_fn(x, y, z)                 # traces, compiles module "jit_model_fn", runs
    model_fn(x, y, z)                 # cache hit: runs the same executable
    model_fn(x[:10], y[:10], z[:10])  # new shapes: traced and compiled again
    model_fn.cache_info()             # CacheInfo(hits=1, misses=2, entries=2, ...)
    model_fn.lower(x, y, z).as_text("hlo")

The cache key is everything the compiled program depends on: the pytree structure of
the arguments, each array's shape and dtype (and whether it is a weakly typed Python
scalar), the values of the static arguments, the backend and the flags
(``xla_teach.flags.current()``: changing e.g. ``xla_disable_hlo_passes`` recompiles).
Every compilation is logged to the ``xla_teach.jit`` logger and kept in
``f.compile_log`` with the reason (why it recompiled on this call).

``jit(f, donate_argnums=0)`` donates the first argument, as in JAX: each of its arrays
is paired with the first not-yet-paired output of the same shape and dtype, the pair
is written into the module's ``input_output_alias``, and the compiled program writes
that output into the donated array instead of allocating a new one. The donated array
must not be used afterwards (its bytes now hold the result). A donated array that
matches no output is reported with a warning, as JAX does.

``jit(f, compile_options=CompileOptions(...))`` compiles with those options, e.g. a
``pipeline_hook`` that inserts a pass of your own (see docs/passes.md).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach import flags
from xla_teach.backends.options import CompileOptions
from xla_teach.backends.registry import BACKENDS, DEFAULT_BACKEND
from xla_teach.frontend import dtypes
from xla_teach.frontend.pytree import PyTreeDef, tree_flatten, tree_unflatten
from xla_teach.frontend.sharded_array import ShardedArray, output_sharding
from xla_teach.frontend.sharding import GSPMDSharding, sharding_per_leaf
from xla_teach.frontend.stages import Compiled, Lowered
from xla_teach.frontend.tracer import ShapedArray, TraceContext, Tracer, current_context, push_context
from xla_teach.hlo.builder import XlaBuilder
from xla_teach.hlo.evaluator.devices import Pieces
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.sharding import HloSharding

logger = logging.getLogger("xla_teach.jit")


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    entries: int
    compile_seconds: float  # total time spent tracing + compiling


@dataclass(frozen=True)
class CompileEvent:
    """One cache miss: what was compiled, why, and how long it took."""

    signature: str
    reason: str
    trace_seconds: float
    compile_seconds: float


@dataclass
class _Entry:
    module: HloModule
    out_tree: PyTreeDef
    executable: Any = None
    partitioned: HloModule | None = None  # the per-device module, when it runs on several devices


class _Static:
    """Placeholder for a static argument in the flattened dynamic arguments."""

    def __repr__(self) -> str:
        return "<static>"


_STATIC = _Static()


def _aval_of(leaf: Any, where: str) -> ShapedArray:
    if isinstance(leaf, (bool, int, float)) and not isinstance(leaf, np.generic):
        return ShapedArray((), dtypes.python_scalar_dtype(leaf), weak_type=True)
    if isinstance(leaf, (np.ndarray, np.generic, ShardedArray)):
        return ShapedArray(tuple(np.shape(leaf)), dtypes.canonicalize(leaf.dtype))
    raise ValueError(f"jit: {where} is a {type(leaf).__name__}, not an array; pass arrays (or pytrees of "
                     "arrays), or mark the argument static with static_argnums/static_argnames")


def _mark_for_the_partitioner(param: HloInstruction) -> None:
    """After a sharded parameter, a ``Sharding`` custom call with its sharding that every user
    reads instead, as JAX lowers ``in_shardings``: the module says by itself that it is a global
    program still to partition (its dump replays as one), and the compile pipeline's
    spmd-partitioning stage partitions it."""
    comp = param.parent
    assert comp is not None and param.sharding is not None
    users = list(param.users)
    mark = comp.add_instruction(HloInstruction("custom-call", param.shape, [param],
                                               {"custom_call_target": "Sharding"}), f"{param.name}.sharding")
    mark.sharding = param.sharding
    for user in users:
        user.replace_operands(param, mark)
    if comp.root_instruction is param:
        comp.root_instruction = mark


class JitFunction:
    """The object ``jit(fn)`` returns. Call it like ``fn``."""

    def __init__(self, fn: Callable[..., Any], static_argnums: int | Sequence[int] = (),
                 static_argnames: str | Sequence[str] = (), backend: str = DEFAULT_BACKEND,
                 donate_argnums: int | Sequence[int] = (), compile_options: CompileOptions | None = None,
                 in_shardings: Any = None, out_shardings: Any = None) -> None:
        if not callable(fn):
            raise ValueError(f"jit needs a function, got {type(fn).__name__}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
        if compile_options is not None and not isinstance(compile_options, CompileOptions):
            raise ValueError(f"jit: compile_options must be a CompileOptions, got {type(compile_options).__name__}")
        self._fn = fn
        self.backend = backend
        self.compile_options = compile_options
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        both = sorted(set(self.donate_argnums) & set(self.static_argnums))
        if both:
            raise ValueError(f"jit: argument {both[0]} is both static and donated; only arrays can be donated")
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        self.name = getattr(fn, "__name__", "fn").replace("<lambda>", "lambda")
        self._cache: dict[Any, _Entry] = {}
        self._compiling = threading.RLock()  # one trace-and-compile at a time; hits need no lock
        self._hits = 0
        self._misses = 0
        self._seconds = 0.0
        self.compile_log: list[CompileEvent] = []
        try:
            self._param_names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            self._param_names = []
        functools.update_wrapper(self, fn, updated=())

    # ---- the cache ----------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, len(self._cache), self._seconds)

    def cache_clear(self) -> None:
        self._cache.clear()
        self._hits = self._misses = 0
        self._seconds = 0.0

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        n = len(args)
        static_pos = {i % n if n else i for i in self.static_argnums if -n <= i < n}
        for i in self.static_argnums:
            if not -max(n, 1) <= i < max(n, 1):
                raise ValueError(f"jit({self.name}): static_argnums {i} but only {n} positional arguments given")
        dyn_args = tuple(_STATIC if i in static_pos else a for i, a in enumerate(args))
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        statics = (tuple((i, args[i]) for i in sorted(static_pos)),
                   tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames)))
        for where, value in [(f"argument {i}", v) for i, v in statics[0]] + [(repr(k), v) for k, v in statics[1]]:
            try:
                hash(value)
            except TypeError:
                hint = " (use a tuple)" if isinstance(value, list) else ""
                raise ValueError(f"jit({self.name}): static {where} must be hashable (static arguments are part "
                                 f"of the cache key), got a {type(value).__name__}{hint}: {value!r:.200}") from None
        leaves, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        dyn = [(i, leaf) for i, leaf in enumerate(leaves) if leaf is not _STATIC]
        avals = tuple(_aval_of(leaf, f"argument leaf {i}") for i, leaf in dyn)
        return leaves, in_tree, statics, avals, [i for i, _ in dyn]

    def _key(self, in_tree: PyTreeDef, statics: Any, avals: tuple[ShapedArray, ...], leaves: list[Any]) -> Any:
        flag_values = tuple(sorted(flags.current().items()))
        splits = tuple((leaf.sharding.hlo_sharding(leaf.ndim).to_text(), leaf.sharding.device_ids)
                       for leaf in leaves if isinstance(leaf, ShardedArray))  # a new split is a new program
        return (in_tree, avals, statics, self.backend, flag_values, splits)

    # ---- tracing -------------------------------------------------------------------------
    def _param_path(self, leaf_index: int, in_tree: PyTreeDef) -> str:
        """The argument's pytree path, as JAX writes it into a parameter's ``op_name``:
        ``params['w1']``, ``batch[0]``, ``x``."""
        (args_tree, kwargs_tree) = in_tree.children
        k = leaf_index
        for pos, child in enumerate(args_tree.children):
            if k < child.num_leaves:
                base = self._param_names[pos] if pos < len(self._param_names) else f"arg{pos}"
                return base + child.leaf_path(k)
            k -= child.num_leaves
        for key, child in zip(kwargs_tree.data or (), kwargs_tree.children, strict=True):
            if k < child.num_leaves:
                return str(key) + child.leaf_path(k)
            k -= child.num_leaves
        return f"arg{leaf_index}"

    def _param_name(self, leaf_index: int, in_tree: PyTreeDef) -> str:
        (args_tree, kwargs_tree) = in_tree.children
        k = leaf_index
        for pos, child in enumerate(args_tree.children):
            count = child.num_leaves
            if k < count:
                base = self._param_names[pos] if pos < len(self._param_names) else f"arg{pos}"
                return base if count == 1 else f"{base}_{k}"
            k -= count
        for key, child in zip(kwargs_tree.data or (), kwargs_tree.children, strict=True):
            count = child.num_leaves
            if k < count:
                return str(key) if count == 1 else f"{key}_{k}"
            k -= count
        return f"arg{leaf_index}"

    def trace(self, leaves: list[Any], in_tree: PyTreeDef, dyn_index: list[int],
              avals: tuple[ShapedArray, ...]) -> tuple[HloModule, PyTreeDef]:
        """Run the function on tracers; returns the module and the output structure."""
        builder = XlaBuilder(f"jit_{self.name}")
        ctx = TraceContext(builder, f"jit({self.name})")
        full = list(leaves)
        with push_context(ctx):
            for number, (i, aval) in enumerate(zip(dyn_index, avals, strict=True)):
                with ctx.metadata(self._param_path(i, in_tree), scoped=False):
                    op = builder.parameter(number, aval.hlo_shape(), self._param_name(i, in_tree))
                full[i] = Tracer(ctx, op, aval.weak_type)
            args, kwargs = tree_unflatten(in_tree, full)
            statics = dict(self._pending_statics)
            args = tuple(statics.get(i, a) for i, a in enumerate(args))
            kwargs = {**kwargs, **dict(self._pending_static_kwargs)}
            out = self._fn(*args, **kwargs)
            out_leaves, out_tree = tree_flatten(out)
            results = [ctx.lift(leaf) for leaf in out_leaves]
            if len(results) == 1 and out_tree.kind == "leaf":
                root = results[0].op
            else:
                root = builder.tuple([r.op for r in results])
        module = builder.build(root)
        if self.donate_argnums:
            self._alias_donated(module, in_tree, dyn_index)
        if self.in_shardings is not None or self.out_shardings is not None or any(
                isinstance(leaf, ShardedArray) for leaf in leaves):
            self._annotate_shardings(module, in_tree, dyn_index, leaves)
        return module, out_tree

    def _annotate_shardings(self, module: HloModule, in_tree: PyTreeDef, dyn_index: list[int],
                            leaves: list[Any]) -> None:
        """Write ``in_shardings``/``out_shardings`` (one NamedSharding for all, or one per positional
        argument / per output) onto the parameters and the ROOT, and ``num_partitions`` into the
        header. A ShardedArray argument brings its own sharding (it must agree with ``in_shardings``)."""
        args_tree = in_tree.children[0]
        given = self.in_shardings
        if not isinstance(given, (list, tuple)):  # one sharding (or None) for every argument
            given = [given] * len(args_tree.children)
        per_leaf: list[Any] = []
        for pos, child in enumerate(args_tree.children):
            per_leaf += sharding_per_leaf(given[pos] if pos < len(given) else None, child, f"in_shardings[{pos}]")
        per_leaf += [None] * (len(leaves) - len(per_leaf))  # keyword arguments: their own sharding or none
        for i, leaf in enumerate(leaves):
            if not isinstance(leaf, ShardedArray):
                continue
            if per_leaf[i] is None:
                per_leaf[i] = leaf.sharding
            elif per_leaf[i].hlo_sharding(leaf.ndim) != leaf.sharding.hlo_sharding(leaf.ndim):
                raise ValueError(f"jit({self.name}): argument {self._param_path(i, in_tree)} is split as "
                                 f"{leaf.sharding!r}, but in_shardings says {per_leaf[i]!r} (device_put it "
                                 "to that sharding first, or leave its in_shardings entry None)")
        meshes = set()
        for number, leaf in enumerate(dyn_index):
            named = per_leaf[leaf] if leaf < len(per_leaf) else None
            if named is not None:
                param = module.entry.parameter(number)
                param.sharding = named.hlo_sharding(param.shape.rank)
                _mark_for_the_partitioner(param)
                meshes.add(named.num_devices)
        root = module.entry.root_instruction
        leaves = list(root.shape.tuple_shapes) if root.shape.is_tuple else [root.shape]
        if self.out_shardings is not None:
            outs = self.out_shardings if isinstance(self.out_shardings, (list, tuple)) else [self.out_shardings] * len(
                leaves)
            if len(outs) != len(leaves):
                raise ValueError(f"jit({self.name}): out_shardings has {len(outs)} entries for {len(leaves)} outputs")
            elements = [o.hlo_sharding(shape.rank) for o, shape in zip(outs, leaves, strict=True)]
            root.sharding = HloSharding("tuple", elements=tuple(elements)) if root.shape.is_tuple else elements[0]
            meshes |= {o.num_devices for o in outs}
        if len(meshes) > 1:
            raise ValueError(f"jit({self.name}): the shardings use meshes of different sizes {sorted(meshes)}")
        if meshes:
            module.header_attributes["num_partitions"] = str(meshes.pop())

    def _donated_parameters(self, in_tree: PyTreeDef, dyn_index: list[int]) -> list[int]:
        """Parameter numbers of the array leaves of the donated positional arguments."""
        args_tree = in_tree.children[0]
        n = len(args_tree.children)
        donated = {i % n for i in self.donate_argnums if -n <= i < n}
        for i in self.donate_argnums:
            if not -max(n, 1) <= i < max(n, 1):
                raise ValueError(f"jit({self.name}): donate_argnums {i} but only {n} positional arguments given")
        params, first = [], 0
        for pos, child in enumerate(args_tree.children):
            if pos in donated:
                params += [dyn_index.index(k) for k in range(first, first + child.num_leaves) if k in dyn_index]
            first += child.num_leaves
        return params

    def _alias_donated(self, module: HloModule, in_tree: PyTreeDef, dyn_index: list[int]) -> None:
        """Pair each donated parameter with the first free output of equal shape (JAX's rule)."""
        entry = module.entry
        root_shape = entry.root.shape
        outputs = [((k,), s) for k, s in enumerate(root_shape.tuple_shapes)] if root_shape.is_tuple \
            else [((), root_shape)]
        free = list(outputs)
        unusable = []
        for number in self._donated_parameters(in_tree, dyn_index):
            shape = entry.parameter(number).shape
            match = next((o for o in free if not o[1].is_tuple and o[1].compatible(shape)), None)
            if match is None:
                unusable.append(f"{entry.parameter(number).name}: {shape.to_text(print_layout=False)}")
                continue
            free.remove(match)
            module.input_output_alias.set_up_alias(match[0], number, (), "may-alias")
        if unusable:
            warnings.warn(f"jit({self.name}): some donated buffers were not usable (no output of the same shape "
                          f"and dtype): {', '.join(unusable)}", UserWarning, stacklevel=5)

    def _lookup(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[_Entry, list[Any], list[int],
                                                                               tuple[ShapedArray, ...]]:
        leaves, in_tree, statics, avals, dyn_index = self._split(args, kwargs)
        key = self._key(in_tree, statics, avals, leaves)
        entry = self._cache.get(key)
        if entry is None:
            with self._compiling:  # threads that miss together: the first compiles, the rest find it
                entry = self._cache.get(key)
                if entry is None:
                    entry = self._trace_and_compile(key, leaves, in_tree, statics, avals, dyn_index)
                    return entry, leaves, dyn_index, avals
        self._hits += 1
        return entry, leaves, dyn_index, avals

    def _trace_and_compile(self, key: Any, leaves: list[Any], in_tree: PyTreeDef, statics: Any,
                           avals: tuple[ShapedArray, ...], dyn_index: list[int]) -> _Entry:
        self._misses += 1
        self._pending_statics, self._pending_static_kwargs = statics
        start = time.perf_counter()
        module, out_tree = self.trace(leaves, in_tree, dyn_index, avals)
        traced = time.perf_counter()
        entry = _Entry(module, out_tree)
        entry.executable = self._compile(module)
        if module.device_count() > 1:  # the pipeline's spmd-partitioning stage made the per-device program
            entry.partitioned = entry.executable.module
        done = time.perf_counter()
        self._seconds += done - start
        self._log(in_tree, avals, statics, traced - start, done - traced)
        self._cache[key] = entry
        return entry

    def _compile(self, module: HloModule) -> Any:
        from xla_teach.api import compile_module

        options = None
        if self.compile_options is not None:  # a fresh copy: the driver appends dump listeners
            options = dataclasses.replace(self.compile_options, pass_options=dataclasses.replace(
                self.compile_options.pass_options, listeners=list(self.compile_options.pass_options.listeners)))
        return compile_module(module.clone(), self.backend, options)

    def _log(self, in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], statics: Any, trace_s: float,
             compile_s: float) -> None:
        signature = ", ".join(str(a) for a in avals)
        if not self.compile_log:
            reason = "first call"
        else:
            previous = self.compile_log[-1].signature
            reason = f"new input signature ({previous}) -> ({signature})" if previous != signature else \
                "same shapes, but different static arguments, argument structure, backend or flags"
            logger.info("jit(%s): recompiling: %s", self.name, reason)
        self.compile_log.append(CompileEvent(signature, reason, trace_s, compile_s))
        logger.debug("jit(%s): compiled for (%s) in %.3fs", self.name, signature, trace_s + compile_s)

    # ---- calling ---------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_context() is not None:  # inside another trace: inline
            return self._fn(*args, **kwargs)
        entry, leaves, dyn_index, avals = self._lookup(args, kwargs)
        return self._execute(entry, leaves, dyn_index, avals)

    def _execute(self, entry: _Entry, leaves: list[Any], dyn_index: list[int],
                 avals: tuple[ShapedArray, ...]) -> Any:
        if entry.partitioned is not None:
            return self._execute_on_devices(entry, [leaves[i] for i in dyn_index], avals)
        inputs = [np.asarray(leaves[i], dtype=a.dtype) for i, a in zip(dyn_index, avals, strict=True)]
        outputs = entry.executable.execute(inputs)
        dumper = entry.executable.dumper
        if dumper is not None and flags.get("xla_dump_hlo_snapshots"):
            dumper.snapshot(inputs, outputs)
        return tree_unflatten(entry.out_tree, [np.asarray(o) for o in outputs])

    def _execute_on_devices(self, entry: _Entry, args: list[Any], avals: tuple[ShapedArray, ...]) -> Any:
        """Sharded in, sharded out: ShardedArray arguments go to the devices as their pieces, and
        then the results stay on the devices too; NumPy arguments are split and the results put
        back together (``frontend/sharded_array.py``)."""
        from xla_teach.api import run_on_devices

        assert entry.partitioned is not None
        keep = any(isinstance(a, ShardedArray) for a in args)
        inputs = [a.pieces if isinstance(a, ShardedArray) else np.asarray(a, dtype=aval.dtype)
                  for a, aval in zip(args, avals, strict=True)]
        outputs = run_on_devices(entry.partitioned, entry.executable, inputs, self.backend, keep_split=keep)
        self._snapshot_global(entry, args, outputs)
        if not keep:
            return tree_unflatten(entry.out_tree, [np.asarray(o) for o in outputs])
        given = self.out_shardings if isinstance(self.out_shardings, (list, tuple)) else \
            [self.out_shardings] * len(outputs)
        devices = tuple(range(entry.partitioned.device_count()))
        return tree_unflatten(entry.out_tree, [ShardedArray(o, output_sharding(o.sharding, g, devices))
                                               for o, g in zip(outputs, given, strict=True)])

    def _snapshot_global(self, entry: _Entry, args: list[Any], outputs: list[Any]) -> None:
        """``--xla_dump_hlo_snapshots``: the per-device module with the *global* arguments and
        results (``xla-teach replay`` splits them again, as here). In one process only: under MPI
        no process holds the whole."""
        from xla_teach.runtime import distributed

        dumper = getattr(entry.executable, "dumper", None)
        if dumper is None or not flags.get("xla_dump_hlo_snapshots") or distributed.process_count() > 1:
            return
        whole = [np.asarray(a) for a in args]
        dumper.snapshot(whole, [np.asarray(ShardedArray(o, GSPMDSharding(
            tuple(range(entry.partitioned.device_count())), o.sharding))) if isinstance(o, Pieces) else np.asarray(o)
            for o in outputs])

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace (without compiling) for these arguments; ``.compile()`` compiles (cached)."""
        leaves, in_tree, statics, avals, dyn_index = self._split(args, kwargs)
        self._pending_statics, self._pending_static_kwargs = statics
        module, _ = self.trace(leaves, in_tree, dyn_index, avals)

        def compile_fn() -> Compiled:
            entry, _, _, compiled_avals = self._lookup(args, kwargs)
            compiled_key = self._key(in_tree, statics, avals, leaves)

            def call(*new_args: Any, **new_kwargs: Any) -> Any:
                """Only arguments like the ones it was compiled for, as JAX's ``Compiled``."""
                new_leaves, new_tree, new_statics, new_avals, new_index = self._split(new_args, new_kwargs)
                if self._key(new_tree, new_statics, new_avals, new_leaves) != compiled_key:
                    raise TypeError(f"{self.name}: this executable was compiled for arguments "
                                    f"({', '.join(map(str, compiled_avals))}) and is called with "
                                    f"({', '.join(map(str, new_avals))}) or other static arguments/structure; "
                                    f"call the jitted function itself to compile for new arguments")
                return self._execute(entry, new_leaves, new_index, new_avals)

            return Compiled(entry.executable, call)

        return Lowered(module, self.backend, compile_fn)

    def __repr__(self) -> str:
        return f"<jit({self.name}) backend={self.backend}>"


def jit(fn: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), backend: str = DEFAULT_BACKEND,
        donate_argnums: int | Sequence[int] = (), compile_options: CompileOptions | None = None,
        in_shardings: Any = None, out_shardings: Any = None) -> Any:
    """Compile ``fn`` with XLA: ``jit(f)`` or ``@jit`` or ``@jit(static_argnums=1, backend="interpreter")``.

    ``donate_argnums``: positional arguments whose arrays the compiled program may overwrite
    with outputs of the same shape and dtype (see the module docstring). ``compile_options``:
    a :class:`~xla_teach.backends.options.CompileOptions` used instead of the one the flags
    give (build it with ``CompileOptions.from_flags()`` and change fields to keep the flags).
    ``in_shardings``/``out_shardings``: a ``NamedSharding`` for every argument/output, or one per
    positional argument / per output (``None``: replicated); the program then runs on the mesh's
    devices, partitioned by the SPMD partitioner, on global arrays in and out (``frontend/sharding.py``).
    """
    def make(f: Callable[..., Any]) -> JitFunction:
        return JitFunction(f, static_argnums, static_argnames, backend, donate_argnums, compile_options,
                           in_shardings, out_shardings)

    return make if fn is None else make(fn)
