"""Many threads calling a handful of jitted functions at once, with mixed shapes (so that they
compile while others run): every result is right, each shape compiles once, and resident memory
stays flat once every shape is compiled. Tracing state is per thread, as JAX's is; the compile
cache lets one thread compile while the others wait for it; an executable run by two threads at
once gives each its own scratch memory."""

from __future__ import annotations

import resource
import threading
import time

import numpy as np

import xla_teach as xt
import xla_teach.numpy as xnp

SIZES = (5, 17, 64)


def _functions():  # type: ignore[no-untyped-def]
    f = xt.jit(lambda x: xnp.sum(xnp.tanh(x) * 2))
    g = xt.jit(xt.grad(lambda x: xnp.sum(xnp.sin(x) * x)))
    h = xt.jit(lambda x: xnp.exp(x[:, None] - x[None, :]) @ x)
    return f, g, h


def _check(f, g, h, n: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(f(x), np.sum(np.tanh(x) * 2), rtol=1e-4, atol=1e-4)  # a sum near 0 cancels
    np.testing.assert_allclose(g(x), np.cos(x) * x + np.sin(x), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(h(x), np.exp(x[:, None] - x[None, :]) @ x, rtol=1e-4, atol=1e-4)


def _hammer(f, g, h, seconds: float, threads: int = 8) -> list[str]:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    stop = time.monotonic() + seconds

    def work(k: int) -> None:
        i = 0
        try:
            while time.monotonic() < stop:
                _check(f, g, h, SIZES[(k + i) % len(SIZES)], k * 1000 + i)
                i += 1
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors.append(f"thread {k}: {e!r}"[:300])

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return errors


def test_threads_share_jitted_functions_correctly_and_compile_each_shape_once() -> None:
    f, g, h = _functions()
    assert _hammer(f, g, h, seconds=2.0) == []
    for fn in (f, g, h):
        info = fn.cache_info()
        assert info.misses == len(SIZES) and info.entries == len(SIZES), info


def test_resident_memory_stays_flat_under_load_once_compiled() -> None:
    f, g, h = _functions()
    assert _hammer(f, g, h, seconds=1.0) == []  # every shape compiled, pools warm
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    assert _hammer(f, g, h, seconds=2.0) == []
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 64, f"peak resident memory grew by {grown_mib:.0f} MiB under a steady load"


def test_a_dropped_jitted_function_frees_its_executable_and_machine_code() -> None:
    """Long sessions: compiled code goes with the last reference to its jitted function."""
    import gc
    import weakref

    f = xt.jit(lambda x: xnp.sum(x * 3))
    f(np.ones(8, np.float32))
    (entry,) = f._cache.values()
    executable, engine = weakref.ref(entry.executable), weakref.ref(entry.executable.keep_alive)
    del f, entry
    gc.collect()
    assert executable() is None and engine() is None


def test_flag_overrides_are_per_thread_as_jaxs_config_contexts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two threads run the same jitted function at the same time, each inside its own
    ``flags.override``: one flushes denormals and dumps its compilation, the other computes IEEE
    denormals and dumps nothing. Each sees only its own flags, in ``flags.current()``, in what
    its runs compute, and in what is written; the process-wide values stay as they were."""
    from xla_teach import flags

    square = xt.jit(lambda x: x * x)
    x = np.full(4, 1e-20, np.float32)  # x * x = 1e-40: a denormal, or zero when flushed
    barrier = threading.Barrier(2)
    seen: dict[str, tuple[object, set[float]]] = {}

    def run(name: str, **values: object) -> None:
        with flags.override(**values):
            barrier.wait()  # both inside their overrides at once
            outs = {float(square(x)[0]) for _ in range(40)}
            barrier.wait()
            seen[name] = (flags.current()["xla_dump_to"], outs)

    threads = [threading.Thread(target=run, args=("flush",), kwargs={"xla_teach_flush_denormals": True,
                                                                       "xla_dump_to": str(tmp_path)}),
               threading.Thread(target=run, args=("ieee",), kwargs={"xla_teach_flush_denormals": False})]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["flush"] == (str(tmp_path), {0.0})
    dump_to, ieee = seen["ieee"]
    assert dump_to == flags.FLAGS["xla_dump_to"].default and len(ieee) == 1 and 0 < ieee.pop() < 1.2e-38
    assert list(tmp_path.glob("*.before_optimizations.txt")), "the flushing thread dumped its compilation"
    assert flags.current()["xla_teach_flush_denormals"] == flags.FLAGS["xla_teach_flush_denormals"].default
