"""Denormals are flushed to zero as XLA's CPU runtime flushes them (FTZ/DAZ): the CPU backend
sets the processor's bits for a run (on its pool threads too, and fixes up BLAS's own threads),
the interpreter models them per instruction, and ``--xla_teach_flush_denormals=false`` keeps
IEEE denormals. The expected values are XLA's (JAX 0.10.2 on x86-64), re-derived from XLA itself
when JAX is installed."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xla_teach import flags
from xla_teach.api import execute
from xla_teach.runtime.denormals import denormals_flushed_here, fp_control, scoped_flush_denormal

pytestmark = pytest.mark.skipif(not denormals_flushed_here(), reason="no known FTZ/DAZ register on this CPU")

D = 1e-39  # a denormal in f32 and bf16
F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16


def _unary(op: str, t: str, out: str | None = None, attrs: str = "") -> str:
    return (f"HloModule m\nENTRY e {{\n  x = {t}[1] parameter(0)\n"
            f"  ROOT r = {out or t}[1] {op}(x){attrs}\n}}\n")


def _binary(op: str, t: str, out: str | None = None, attrs: str = "") -> str:
    return (f"HloModule m\nENTRY e {{\n  x = {t}[1] parameter(0)\n  y = {t}[1] parameter(1)\n"
            f"  ROOT r = {out or t}[1] {op}(x, y){attrs}\n}}\n")


# (name, HLO, inputs, XLA's result, the IEEE result)
CASES = [
    ("log reads a denormal as zero", _unary("log", "f32"), [np.array([D], F32)], [-np.inf], [np.log(F32(D))]),
    ("a product that would be denormal is zero", _binary("multiply", "f32"),
     [np.array([1e-20], F32), np.array([1e-20], F32)], [0.0], [F32(1e-20) * F32(1e-20)]),
    ("f64 too", _binary("multiply", "f64"), [np.array([1e-160]), np.array([1e-160])], [0.0], [1e-320]),
    ("compare reads it as zero", _binary("compare", "f32", "pred", ", direction=GT"),
     [np.array([D], F32), np.array([0.0], F32)], [False], [True]),
    ("maximum with zero", _binary("maximum", "f32"), [np.array([D], F32), np.array([0.0], F32)], [0.0], [D]),
    ("sign", _unary("sign", "f32"), [np.array([-D], F32)], [-0.0], [-1.0]),
    ("widening convert", _unary("convert", "f32", "f64"), [np.array([D], F32)], [0.0], [float(F32(D))]),
    ("narrowing convert", _unary("convert", "f64", "f32"), [np.array([D])], [0.0], [F32(D)]),
    ("bf16 shares f32's range", _unary("log", "bf16"), [np.array([D], BF16)], [-np.inf],
     [float(np.log(np.float32(BF16(D))))]),
    ("negate moves bits", _unary("negate", "f32"), [np.array([D], F32)], [-F32(D)], [-F32(D)]),
    ("abs moves bits", _unary("abs", "f32"), [np.array([-D], F32)], [F32(D)], [F32(D)]),
    ("copy moves bits", _unary("copy", "f32"), [np.array([D], F32)], [F32(D)], [F32(D)]),
    ("tanh returns tiny operands", _unary("tanh", "f32"), [np.array([D], F32)], [F32(D)], [F32(D)]),
    ("f16 denormals are normal in f32", _binary("multiply", "f16"),
     [np.array([1e-3], F16), np.array([1e-3], F16)], [F16(1e-3) * F16(1e-3)], [F16(1e-3) * F16(1e-3)]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize(("name", "hlo", "args", "xla", "ieee"), CASES, ids=IDS)
def test_backends_flush_denormals_as_xla_cpu_does(backend: str, name: str, hlo: str, args: list[np.ndarray],
                                                  xla: list[float], ieee: list[float]) -> None:
    (got,) = execute(hlo, args, backend=backend)
    want = np.asarray(xla, dtype=got.dtype)
    assert got.tobytes() == want.tobytes(), (name, got, want)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize(("name", "hlo", "args", "xla", "ieee"), CASES, ids=IDS)
def test_the_flag_keeps_ieee_denormals(backend: str, name: str, hlo: str, args: list[np.ndarray],
                                       xla: list[float], ieee: list[float]) -> None:
    with flags.override(xla_teach_flush_denormals=False):
        (got,) = execute(hlo, args, backend=backend)
    want = np.asarray(ieee, dtype=got.dtype)
    assert got.tobytes() == want.tobytes(), (name, got, want)


# The same programs in JAX, to re-derive XLA's answers (f64 needs jax_enable_x64: left out).
JAX_PROGRAMS = {
    "log reads a denormal as zero": lambda jnp, lax: jnp.log,
    "a product that would be denormal is zero": lambda jnp, lax: lambda x, y: x * y,
    "compare reads it as zero": lambda jnp, lax: lambda x, y: x > y,
    "maximum with zero": lambda jnp, lax: jnp.maximum,
    "sign": lambda jnp, lax: lax.sign,
    "bf16 shares f32's range": lambda jnp, lax: jnp.log,
    "negate moves bits": lambda jnp, lax: lax.neg,
    "abs moves bits": lambda jnp, lax: lax.abs,
    "copy moves bits": lambda jnp, lax: lambda x: x,
    "tanh returns tiny operands": lambda jnp, lax: lax.tanh,
    "f16 denormals are normal in f32": lambda jnp, lax: lambda x, y: x * y,
}


def test_the_recorded_answers_are_xlas() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    checked = 0
    for name, _, args, xla, _ in CASES:
        if name not in JAX_PROGRAMS:
            continue
        got = np.asarray(jax.jit(JAX_PROGRAMS[name](jnp, lax))(*args))
        assert got.tobytes() == np.asarray(xla, dtype=got.dtype).tobytes(), (name, got, xla)
        checked += 1
    assert checked == len(JAX_PROGRAMS)


def test_pool_threads_and_blas_threads_flush_too() -> None:
    """A kernel split across the thread pool, and a product large enough for OpenBLAS's own
    threads: no denormal anywhere in the results."""
    n = 1 << 21
    big = ("HloModule m\nENTRY e {\n  x = f32[2097152] parameter(0)\n  y = f32[2097152] parameter(1)\n"
           "  ROOT r = f32[2097152] multiply(x, y)\n}\n")
    (got,) = execute(big, [np.full(n, 1e-20, F32), np.full(n, 1e-20, F32)], backend="cpu")
    assert not got.any()
    dot = ("HloModule m\nENTRY e {\n  x = f32[512,512] parameter(0)\n  y = f32[512,512] parameter(1)\n"
           "  ROOT r = f32[512,512] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    a = np.full((512, 512), 1e-23, F32)
    b = np.full((512, 512), 1e-20, F32)
    (got,) = execute(dot, [a, b], backend="cpu")
    assert not got.any()
    with flags.override(xla_teach_flush_denormals=False):
        (kept,) = execute(dot, [a, b], backend="cpu")
    assert kept.all() and np.all(np.abs(kept) < np.finfo(F32).tiny)


def test_the_scope_sets_the_register_on_this_thread_and_restores_it() -> None:
    control = fp_control()
    assert control is not None
    x = np.array([D], F32)
    before = control.read()
    assert not control.flushing()
    with scoped_flush_denormal():
        assert control.flushing()
        assert (x * F32(1))[0] == 0  # NumPy runs on this thread: it flushes too
        with scoped_flush_denormal():  # nested: still flushing, and the outer scope restores
            assert control.flushing()
        assert control.flushing()
    assert control.read() & control.mask == before & control.mask
    assert (x * F32(1))[0] == F32(D)
    with scoped_flush_denormal(enabled=False):
        assert not control.flushing()


# power reads its operands' bits (a negative base and a denormal exponent, not an integer: NaN);
# XLA's answers (JAX 0.10.2), compared up to the sign of a NaN. (XLA's power of a denormal *base*
# is glibc's powf reading it under DAZ, which neither backend imitates: pow(1e-39, 0.5) is 2.6e-23
# in XLA, 3.2e-20 here.)
POWER_BASES = np.array([-1.0, -3e-40, 2.0, np.nan, 0.5, -1e-39, 1e-39], F32)
POWER_EXPONENTS = np.array([1e-39, -3e-40, 1e-39, 1e-39, 1e-39, 3.0, -1.0], F32)
POWER_XLA = np.array([np.nan, np.nan, 1.0, np.nan, 1.0, -0.0, np.inf], F32)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_power_decides_its_special_cases_on_the_operands_bits(backend: str) -> None:
    hlo = _binary("power", "f32").replace("[1]", "[7]")
    (got,) = execute(hlo, [POWER_BASES, POWER_EXPONENTS], backend=backend)
    np.testing.assert_array_equal(got, POWER_XLA)
    assert np.signbit(got[5])  # -0.0: an odd power of a negative denormal (flushed) keeps the sign


def test_the_recorded_power_answers_are_xlas() -> None:
    jax = pytest.importorskip("jax")
    got = np.asarray(jax.jit(lambda x, y: x ** y)(POWER_BASES, POWER_EXPONENTS))
    np.testing.assert_array_equal(got, POWER_XLA)
