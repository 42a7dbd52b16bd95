"""A differential fuzzer against real XLA: random JAX programs, XLA's answer vs xla_teach's.

    .venv/bin/pip install -e ".[bench]"             # JAX (XLA) is the oracle
    .venv/bin/python scripts/fuzz_against_xla.py -n 10000 --seed 0 --out fuzz_out/

Each program is a few (3-10) operations drawn from every op family -- elementwise math,
comparisons and select, integer and bitwise arithmetic, conversions, reductions, shape ops
(broadcast, transpose, reshape, slice, concatenate, reverse, pad), dot, cumulative sums, sort,
argmax -- on f32, f16, bf16, s32 or u8 arrays whose values include the special ones: NaN, +-inf,
-0.0, integer extremes and denormals (``--no-denormals`` leaves those out). JAX lowers it to HLO; XLA CPU
runs it (``jax.jit``); the same HLO text runs on xla_teach's interpreter and CPU backend. A
result that differs beyond the tolerance of its dtype and ops, or a crash, is a finding: the
program is shrunk (operations dropped while it still fails) and written to ``--out`` as a
reproducer (the HLO, the inputs and XLA's outputs in an .npz, the program as text).

XLA's CPU runtime flushes denormals to zero, and so do xla_teach's CPU backend and interpreter
(docs/xla-compatibility.md). Transcendental functions may differ by a few ulps (their tolerance
is wider).

On a machine with an NVIDIA GPU and JAX with CUDA, ``--xla-platform gpu --backends gpu`` fuzzes
xla_teach's GPU backend against XLA's GPU compiler; ``--jobs`` runs stretches side by side and
``--seconds`` stops starting programs after that long (``scripts/gpu_check.sh`` does both).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "uint8")
TRANSCENDENTAL = {"exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt", "log1p", "expm1", "erf", "logistic", "pow"}


@dataclass
class Op:
    name: str
    args: tuple[int, ...]  # indices into the value pool
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Program:
    dtype: str
    shapes: list[tuple[int, ...]]  # the inputs
    ops: list[Op]

    def describe(self) -> str:
        lines = [f"inputs: {', '.join(f'v{i}: {self.dtype}{list(s)}' for i, s in enumerate(self.shapes))}"]
        n = len(self.shapes)
        for k, op in enumerate(self.ops):
            params = f" {op.params}" if op.params else ""
            lines.append(f"v{n + k} = {op.name}({', '.join(f'v{a}' for a in op.args)}){params}")
        return "\n".join(lines)


# ---- the operations, in jax.numpy; each returns None when it does not apply to its operands ---
def _unary(name: str):  # type: ignore[no-untyped-def]
    def apply(jnp, lax, x, params):  # type: ignore[no-untyped-def]
        floating = jnp.issubdtype(x.dtype, jnp.floating)
        if name in TRANSCENDENTAL | {"floor", "ceil", "round", "sign"} and not floating:
            return None
        if name in ("not", "popcnt", "clz") and floating:
            return None
        fn = {"exp": jnp.exp, "log": jnp.log, "sin": jnp.sin, "cos": jnp.cos, "tanh": jnp.tanh,
              "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "log1p": jnp.log1p, "expm1": jnp.expm1, "erf": lax.erf,
              "logistic": lax.logistic, "abs": jnp.abs, "neg": jnp.negative, "floor": jnp.floor,
              "ceil": jnp.ceil, "round": lambda v: lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN),
              "sign": jnp.sign, "not": jnp.invert, "popcnt": lax.population_count, "clz": lax.clz}[name]
        return fn(x)
    return apply


def _binary(name: str):  # type: ignore[no-untyped-def]
    def apply(jnp, lax, x, y, params):  # type: ignore[no-untyped-def]
        if x.shape != y.shape:
            return None
        floating = jnp.issubdtype(x.dtype, jnp.floating)
        if name in ("and", "or", "xor", "shl", "shr", "rem_int", "div_int") and floating:
            return None
        if name == "pow" and not floating:
            return None
        fn = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": lax.div, "max": jnp.maximum,
              "min": jnp.minimum, "pow": lax.pow, "atan2": jnp.arctan2, "rem": lax.rem, "and": jnp.bitwise_and,
              "or": jnp.bitwise_or, "xor": jnp.bitwise_xor, "shl": lax.shift_left, "shr": lax.shift_right_logical,
              "div_int": lax.div, "rem_int": lax.rem}[name]
        if name == "atan2" and not floating:
            return None
        return fn(x, y)
    return apply


def _select(jnp, lax, x, y, params):  # type: ignore[no-untyped-def]
    if x.shape != y.shape:
        return None
    return jnp.where(x < y, x, y)


def _compare_convert(jnp, lax, x, params):  # type: ignore[no-untyped-def]
    return (x > params["threshold"]).astype(x.dtype)


def _convert_roundtrip(jnp, lax, x, params):  # type: ignore[no-untyped-def]
    return x.astype(params["to"]).astype(x.dtype)


def _reduce(jnp, lax, x, params):  # type: ignore[no-untyped-def]
    if x.ndim == 0:
        return None
    axis = params["axis"] % x.ndim
    fn = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min, "prod": jnp.prod}[params["kind"]]
    return fn(x, axis=axis, keepdims=params["keepdims"])


def _shape_op(jnp, lax, x, params):  # type: ignore[no-untyped-def]
    kind = params["kind"]
    if kind == "transpose":
        return jnp.transpose(x) if x.ndim >= 2 else None
    if kind == "reshape":
        return x.reshape(-1)
    if kind == "reverse":
        return jnp.flip(x, axis=-1) if x.ndim else None
    if kind == "slice":
        return x[..., 1:] if x.ndim and x.shape[-1] > 1 else None
    if kind == "pad":
        return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(1, 2)], constant_values=1) if x.ndim else None
    if kind == "broadcast":
        return jnp.broadcast_to(x, (2, *x.shape)) if x.ndim < 3 else None
    if kind == "concatenate":
        return jnp.concatenate([x, x], axis=-1) if x.ndim else None
    return None


def _dot(jnp, lax, x, y, params):  # type: ignore[no-untyped-def]
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0]:
        if x.ndim == 2 and y.ndim == 2 and x.shape[1] == y.shape[1]:
            return x @ y.T
        return None
    return x @ y


def _cumsum(jnp, lax, x, params):  # type: ignore[no-untyped-def]
    return jnp.cumsum(x, axis=-1) if x.ndim else None


def _sort(jnp, lax, x, params):  # type: ignore[no-untyped-def]
    return jnp.sort(x, axis=-1) if x.ndim else None


def _argmax(jnp, lax, x, params):  # type: ignore[no-untyped-def]
    return jnp.argmax(x, axis=-1).astype(x.dtype) if x.ndim and jnp.issubdtype(x.dtype, jnp.floating) else None


UNARY = ["exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt", "log1p", "expm1", "erf", "logistic", "abs", "neg",
         "floor", "ceil", "round", "sign", "not", "popcnt", "clz"]
BINARY = ["add", "sub", "mul", "div", "max", "min", "pow", "atan2", "rem", "and", "or", "xor", "shl", "shr"]
OPS: dict[str, Any] = {**{n: _unary(n) for n in UNARY}, **{n: _binary(n) for n in BINARY},
                       "select": _select, "compare": _compare_convert, "convert": _convert_roundtrip,
                       "reduce": _reduce, "shape": _shape_op, "dot": _dot, "cumsum": _cumsum, "sort": _sort,
                       "argmax": _argmax}
ARITY = {**{n: 1 for n in UNARY}, **{n: 2 for n in BINARY}, "select": 2, "compare": 1, "convert": 1, "reduce": 1,
         "shape": 1, "dot": 2, "cumsum": 1, "sort": 1, "argmax": 1}


def random_program(rng: np.random.Generator) -> Program:
    dtype = str(rng.choice(FLOATS + INTS, p=[0.45, 0.1, 0.1, 0.25, 0.1]))
    base = tuple(int(d) for d in rng.choice([1, 2, 3, 4, 5, 8], size=rng.integers(1, 3)))
    shapes = [base] * int(rng.integers(1, 4))
    if len(base) == 2 and rng.random() < 0.4:
        shapes.append((base[1], int(rng.choice([1, 3, 4]))))  # something to multiply with
    ops = []
    for _ in range(int(rng.integers(3, 11))):
        name = str(rng.choice(list(OPS)))
        pool = len(shapes) + len(ops)
        args = tuple(int(a) for a in rng.integers(0, pool, ARITY[name]))
        params: dict[str, Any] = {}
        if name == "compare":
            params["threshold"] = float(rng.choice([0.0, 0.5, -1.0]))
        elif name == "convert":
            params["to"] = str(rng.choice(["float32", "float16", "bfloat16", "int32", "uint8"]))
        elif name == "reduce":
            params = {"axis": int(rng.integers(0, 3)), "kind": str(rng.choice(["sum", "max", "min", "prod"])),
                      "keepdims": bool(rng.random() < 0.5)}
        elif name == "shape":
            params["kind"] = str(rng.choice(["transpose", "reshape", "reverse", "slice", "pad", "broadcast",
                                             "concatenate"]))
        ops.append(Op(name, args, params))
    return Program(dtype, shapes, ops)


def build(program: Program, jnp: Any, lax: Any):  # type: ignore[no-untyped-def]
    """The program as a Python function of its inputs, over ``jnp``/``lax``; ops that do not
    apply to their operands are skipped. It returns every value computed (not the inputs)."""
    def fn(*inputs):  # type: ignore[no-untyped-def]
        pool = list(inputs)
        outs = []
        for op in program.ops:
            args = [pool[a] for a in op.args]
            value = OPS[op.name](jnp, lax, *args, op.params)
            if value is None:
                value = args[0]  # keeps the pool's numbering
            else:
                outs.append(value)
            pool.append(value)
        return tuple(outs) if outs else (pool[0] + 0,)
    return fn


def random_inputs(program: Program, rng: np.random.Generator, denormals: bool) -> list[np.ndarray]:
    import ml_dtypes

    dtype = ml_dtypes.bfloat16 if program.dtype == "bfloat16" else np.dtype(program.dtype)
    out = []
    for shape in program.shapes:
        n = int(np.prod(shape))
        if program.dtype in FLOATS:
            specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, 2.0, 1e4, -3.5]
            if denormals:  # below the smallest normal number of the dtype
                specials += [1e-6, -3e-7] if program.dtype == "float16" else [1e-39, -3e-40]
            values = rng.standard_normal(n) * rng.choice([1, 3, 100])
            mask = rng.random(n) < 0.3
            values[mask] = rng.choice(specials, mask.sum())
        else:
            info = np.iinfo(dtype)
            values = rng.integers(-20 if info.min < 0 else 0, 21, n).astype(np.int64)
            mask = rng.random(n) < 0.2
            values[mask] = rng.choice([info.min, info.max, 0, 1, -1 if info.min < 0 else 2], mask.sum())
        out.append(np.asarray(values).astype(dtype).reshape(shape))
    return out


def _tolerance(program: Program, dtype: np.dtype) -> tuple[float, float]:
    transcendental = any(op.name in TRANSCENDENTAL for op in program.ops)
    long_sums = any(op.name in ("reduce", "dot", "cumsum") for op in program.ops)
    base = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}.get(str(dtype), 0.0)
    if base == 0.0:
        return 0.0, 0.0
    factor = (8 if transcendental else 1) * (8 if long_sums else 1)
    return base * factor, base * factor


def compare(program: Program, want: list[np.ndarray], got: list[np.ndarray]) -> str | None:
    """None when ``got`` matches ``want`` within the tolerance; else what differs."""
    if len(want) != len(got):
        return f"{len(got)} results, XLA gave {len(want)}"
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape or w.dtype != g.dtype:
            return f"result {i}: {g.dtype}{list(g.shape)}, XLA {w.dtype}{list(w.shape)}"
        rtol, atol = _tolerance(program, w.dtype)
        if w.dtype.kind in "iub" or rtol == 0.0:
            if not np.array_equal(w, g):
                return f"result {i}: {g.ravel()[:8]} vs XLA {w.ravel()[:8]}"
            continue
        w64, g64 = w.astype(np.float64), g.astype(np.float64)
        same_nan = np.isnan(w64) == np.isnan(g64)
        close = np.isclose(g64, w64, rtol=rtol, atol=atol) | (np.isnan(w64) & np.isnan(g64))
        infinite = np.isinf(w64) | np.isinf(g64)
        close &= ~infinite | (w64 == g64)
        if not (same_nan.all() and close.all()):
            bad = np.flatnonzero(~(same_nan & close))[:4]
            return f"result {i} at {bad.tolist()}: {g64.ravel()[bad]} vs XLA {w64.ravel()[bad]}"
    return None


@dataclass
class Outcome:
    kind: str  # "ok", "mismatch", "crash", "skipped"
    backend: str = ""
    detail: str = ""


XLA_PLATFORM = "cpu"  # where XLA runs the programs (--xla-platform)


def run_one(program: Program, args: list[np.ndarray], backends: list[str]) -> list[Outcome]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    from xla_teach.api import execute

    fn = build(program, jnp, lax)
    try:
        with jax.default_device(jax.devices(XLA_PLATFORM)[0]):
            text = jax.jit(fn, keep_unused=True).lower(*args).compiler_ir("hlo").as_hlo_text()
            want = [np.asarray(v) for v in jax.jit(fn, keep_unused=True)(*args)]
    except Exception as e:  # noqa: BLE001 - JAX refused the program: not ours to judge
        return [Outcome("skipped", detail=f"JAX: {type(e).__name__}: {e}"[:200])]
    outcomes = []
    for backend in backends:
        try:
            got = execute(text, list(args), backend)
        except Exception:  # noqa: BLE001 - every crash is a finding
            outcomes.append(Outcome("crash", backend, traceback.format_exc(limit=6)[-1500:]))
            continue
        problem = compare(program, want, got)
        outcomes.append(Outcome("ok", backend) if problem is None else Outcome("mismatch", backend, problem))
    return outcomes


def shrink(program: Program, args: list[np.ndarray], backends: list[str], deadline: float = 0.0) -> Program:
    """Drop operations (last first) while the program still fails on a backend (same inputs);
    past ``deadline`` (``time.time()``, 0: none) the program is kept as it is then."""
    def fails(p: Program) -> bool:
        return any(o.kind in ("mismatch", "crash") for o in run_one(p, args, backends))

    current = program
    changed = True
    while changed and len(current.ops) > 1 and not (deadline and time.time() > deadline):
        changed = False
        for k in reversed(range(len(current.ops))):
            trial = Program(current.dtype, current.shapes, current.ops[:k] + current.ops[k + 1:])
            n = len(trial.shapes)
            if any(a >= n + i for i, op in enumerate(trial.ops) for a in op.args):
                continue  # an operand that no longer exists
            if fails(trial):
                current, changed = trial, True
                break
    return current


def write_reproducer(out: Path, index: int, program: Program, args: list[np.ndarray], outcome: Outcome) -> Path:
    import jax
    import jax.numpy as jnp
    from jax import lax

    folder = out / f"finding_{index:05d}_{outcome.backend}_{outcome.kind}"
    folder.mkdir(parents=True, exist_ok=True)
    fn = build(program, jnp, lax)
    (folder / "module.hlo").write_text(jax.jit(fn, keep_unused=True).lower(*args).compiler_ir("hlo").as_hlo_text())
    with jax.default_device(jax.devices(XLA_PLATFORM)[0]):
        want = jax.jit(fn, keep_unused=True)(*args)
    np.savez(folder / "io.npz", **{f"arg{i}": a for i, a in enumerate(args)},
             **{f"out{i}": np.asarray(w) for i, w in enumerate(want)})
    report = f"{program.describe()}\n\n{outcome.backend}: {outcome.kind}\n{outcome.detail}\n"
    (folder / "program.txt").write_text(report)
    return folder


def fuzz(n: int, seed: int, backends: list[str], out: Path | None, denormals: bool,
         progress: bool | str = True, start: int = 0, deadline: float = 0.0) -> dict[str, Any]:
    """Programs ``start`` .. ``start + n - 1`` of ``seed``; none is started after ``deadline``
    (``time.time()``; 0: no deadline)."""
    counts = {"programs": 0, "skipped": 0, "ok": 0, "mismatch": 0, "crash": 0}
    findings = []
    began = time.perf_counter()
    for i in range(start, start + n):
        if deadline and time.time() > deadline:
            break
        if progress == "each":
            print(f"program {i}", flush=True)
        rng = np.random.default_rng([seed, i])
        program = random_program(rng)
        args = random_inputs(program, rng, denormals)
        outcomes = run_one(program, args, backends)
        counts["programs"] += 1
        if outcomes[0].kind == "skipped":
            counts["skipped"] += 1
            continue
        for o in outcomes:
            counts[o.kind] += 1
        bad = [o for o in outcomes if o.kind != "ok"]
        if bad:
            findings.append({"index": i, "backend": bad[0].backend, "kind": bad[0].kind, "detail": bad[0].detail[-400:],
                             "program": program.describe()})
            if out is not None:
                write_reproducer(out, i, shrink(program, args, backends, deadline), args, bad[0])
        if progress and (i + 1 - start) % 100 == 0:
            print(f"{i + 1}/{n} programs, {counts['mismatch']} mismatches, {counts['crash']} crashes, "
                  f"{time.perf_counter() - began:.0f} s", flush=True)
    return {"counts": counts, "findings": findings, "seconds": time.perf_counter() - began,
            "backends": backends, "seed": seed, "denormals": denormals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=1000, help="programs to run (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first program (to rerun a stretch)")
    parser.add_argument("--verbose", action="store_true", help="print each program's index before it runs")
    parser.add_argument("--backends", default="interpreter,cpu")
    parser.add_argument("--out", default="", help="folder for reproducers and summary.json (never overwritten)")
    parser.add_argument("--no-denormals", dest="denormals", action="store_false",
                        help="leave denormal floats out of the inputs (XLA's CPU runtime flushes them to zero)")
    parser.add_argument("--chunk", type=int, default=250, help="programs per worker process (default 250)")
    parser.add_argument("--jobs", type=int, default=1, help="stretches run side by side (default 1)")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="start no program after this many seconds (default 0: run all n)")
    parser.add_argument("--xla-platform", default="cpu", choices=("cpu", "gpu"),
                        help="where XLA runs the programs (default cpu; gpu needs JAX with CUDA)")
    parser.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)  # internal: time.time()
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)  # internal: write the result here
    a = parser.parse_args(argv)
    faulthandler.enable()  # a crash of the process itself prints where it happened
    global XLA_PLATFORM
    XLA_PLATFORM = a.xla_platform
    if a.seconds and not a.deadline:
        a.deadline = time.time() + a.seconds
    if a.worker:  # one stretch, in this process
        result = fuzz(a.n, a.seed, a.backends.split(","), Path(a.out) if a.out else None, a.denormals, "each", a.start,
                      a.deadline)
        Path(a.worker).write_text(json.dumps(result))
        return 0
    out = Path(a.out) if a.out else None
    if out is not None:
        if out.exists() and any(out.iterdir()):
            parser.error(f"{out} exists and is not empty; not overwriting it")
        out.mkdir(parents=True, exist_ok=True)
    result = run_in_workers(a, out) if a.jobs <= 1 else run_side_by_side(a, out)
    print(json.dumps(result["counts"]), f"in {result['seconds']:.0f} s")
    for f in result["findings"][:20]:
        print(f"- program {f['index']} ({f['backend']}, {f['kind']}): {f['detail'][:160]}")
    for f in result["process_crashes"]:
        print(f"- program {f['index']}: the process died ({f['detail']})")
    if out is not None:
        (out / "summary.json").write_text(json.dumps(result, indent=1))
    return 0 if not result["findings"] else 1


def run_side_by_side(a: argparse.Namespace, out: Path | None) -> dict[str, Any]:
    """``a.jobs`` stretches of the programs at once, each as :func:`run_in_workers`, added up."""
    from concurrent.futures import ThreadPoolExecutor

    began = time.perf_counter()
    size = -(-a.n // a.jobs)
    parts = [argparse.Namespace(**{**vars(a), "start": a.start + k * size, "n": min(size, a.n - k * size)})
             for k in range(a.jobs) if k * size < a.n]
    with ThreadPoolExecutor(len(parts)) as pool:
        results = list(pool.map(lambda part: run_in_workers(part, out), parts))
    total = results[0]
    for result in results[1:]:
        for k, v in result["counts"].items():
            total["counts"][k] += v
        total["findings"] += result["findings"]
        total["process_crashes"] += result["process_crashes"]
    total["seconds"] = time.perf_counter() - began
    total["xla_platform"] = a.xla_platform
    return total


def run_in_workers(a: argparse.Namespace, out: Path | None) -> dict[str, Any]:
    """Stretches of programs in child processes, so that a program that kills its process (a
    native crash -- seen in jaxlib's own HLO conversion) is recorded and the run goes on after it."""
    import subprocess
    import tempfile

    total: dict[str, Any] = {"counts": {"programs": 0, "skipped": 0, "ok": 0, "mismatch": 0, "crash": 0},
                             "findings": [], "process_crashes": [], "seconds": 0.0, "backends": a.backends.split(","),
                             "seed": a.seed, "denormals": a.denormals}
    began = time.perf_counter()
    index, end = a.start, a.start + a.n
    while index < end:
        n = min(a.chunk, end - index)
        with tempfile.TemporaryDirectory() as tmp:
            result_file = Path(tmp) / "result.json"
            command = [sys.executable, __file__, "--worker", str(result_file), "-n", str(n), "--start", str(index),
                       "--seed", str(a.seed), "--backends", a.backends, "--xla-platform", a.xla_platform,
                       "--deadline", str(a.deadline)] + (["--out", str(out)] if out else []) + \
                ([] if a.denormals else ["--no-denormals"])
            # Under a deadline a stretch gets the time left and 90 s more: a program that hangs
            # (a kernel that never ends) is recorded as a hang instead of stalling the run.
            limit = max(a.deadline - time.time(), 0) + 90 if a.deadline else None
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=limit)
            except subprocess.TimeoutExpired as hung:
                output = hung.stdout.decode() if isinstance(hung.stdout, bytes) else (hung.stdout or "")
                started = [int(line.split()[1]) for line in output.splitlines() if line.startswith("program ")]
                stuck = started[-1] if started else index
                total["process_crashes"].append({"index": stuck, "detail": f"hang: no result {limit:.0f} s after "
                                                 "the stretch started (its earlier programs are not counted)"})
                break
            if result_file.is_file():
                result = json.loads(result_file.read_text())
                for k, v in result["counts"].items():
                    total["counts"][k] += v
                total["findings"] += result["findings"]
                index += n
                if result["counts"]["programs"] < n:  # the deadline passed
                    break
            else:
                started = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("program ")]
                dead = started[-1] if started else index
                finished = dead - index
                if finished:  # rerun the stretch before the crash to count it
                    a_part = argparse.Namespace(**{**vars(a), "start": index, "n": finished})
                    part = run_in_workers(a_part, out)
                    for k, v in part["counts"].items():
                        total["counts"][k] += v
                    total["findings"] += part["findings"]
                    total["process_crashes"] += part["process_crashes"]
                last = (done.stderr.strip().splitlines() or ["?"])
                total["process_crashes"].append({"index": dead, "detail": f"exit {done.returncode}: "
                                                 f"{next((x for x in last if 'Fatal' in x), last[-1])[:200]}"})
                total["counts"]["programs"] += 1
                total["counts"]["skipped"] += 1
                index = dead + 1
        print(f"{index - a.start}/{a.n} programs, {total['counts']['mismatch']} mismatches, "
              f"{total['counts']['crash']} crashes, {time.perf_counter() - began:.0f} s", flush=True)
    total["seconds"] = time.perf_counter() - began
    return total

if __name__ == "__main__":
    sys.exit(main())
