"""What every bug-reproduction tool needs: reading inputs, naming platforms, compiling, comparing.

* :func:`load_hlo_input` reads an HLO text file (an xla_teach dump, a real XLA dump,
  or a hand-written module) or a snapshot (``.npz`` from ``--xla_dump_hlo_snapshots``),
  like ``replay_computation``, which "tries HloSnapshot, then HloProto, then text".
* :func:`normalize_platform` accepts xla_teach's names and XLA's spellings
  (``Host``, ``CUDA``, ``Interpreter``).
* :func:`compile_on` compiles for a platform, optionally with a caller-supplied pass
  pipeline (how ``bisect`` and the tests plant a deliberately broken pass).
* :func:`compare_outputs` is the "close enough?" test of ``run_hlo_module``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xla_teach.backends.backend_info import BACKENDS, UnknownBackendError, backend_info
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPassPipeline

if TYPE_CHECKING:
    from xla_teach.hlo.text.lexer import HloParseError

PLATFORMS = tuple(BACKENDS)


class ToolError(ValueError):
    """A user-facing error of a tool (bad file, bad option); the CLI prints it on one line."""


# A runner computes a module's outputs; tests pass one to stand in for a (broken) backend.
Runner = Callable[[HloModule, list[Any]], list[np.ndarray]]


def normalize_platform(name: str) -> str:
    """The backend a platform name means (XLA's Host, CUDA... too): ``backends/backend_info.py``."""
    try:
        return backend_info(name).name
    except UnknownBackendError as err:
        raise ToolError(str(err).replace("backend", "platform", 1)) from None


# ---- reading inputs ----------------------------------------------------------------------------
@dataclass
class HloInput:
    """A module and whatever the file carried with it."""

    module: HloModule
    source: str  # the path (or "<module>")
    arguments: list[Any] | None = None  # from a snapshot
    recorded_outputs: list[np.ndarray] | None = None  # from a snapshot
    backend: str = ""  # the platform the snapshot was taken on


def load_hlo_input(path: str | Path, input_format: str = "auto") -> HloInput:
    """Read ``path`` as HLO text or as a snapshot; ``input_format`` is auto, hlo or snapshot."""
    from xla_teach.hlo.text.lexer import HloParseError
    from xla_teach.hlo.text.parser import parse_hlo
    from xla_teach.tools.bugs.snapshot import is_snapshot_file, load_snapshot

    path = Path(path)
    if input_format not in ("auto", "hlo", "snapshot"):
        raise ToolError(f"unknown --input_format '{input_format}' (use hlo or snapshot)")
    if not path.exists():
        raise ToolError(f"{path}: no such file")
    if path.is_dir():
        raise ToolError(f"{path} is a directory; give one HLO text file or snapshot")
    if input_format == "snapshot" or (input_format == "auto" and is_snapshot_file(path)):
        snap = load_snapshot(path)
        try:
            return HloInput(snap.module(), str(path), snap.arguments, snap.outputs, snap.backend)
        except HloParseError as err:
            raise ToolError(_parse_error_text(f"{path} (hlo_module)", err)) from None
    if path.suffix in (".pb", ".pbtxt"):
        raise ToolError(f"{path}: HloProto files are not supported; use the text dump (.txt) of the same module")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path}: not a text file (expected HLO text or an xla_teach .npz snapshot)") from None
    try:
        return HloInput(parse_hlo(text), str(path))
    except HloParseError as err:
        raise ToolError(_parse_error_text(str(path), err)) from None


def _parse_error_text(where: str, err: HloParseError) -> str:
    """``where:line:col: reason`` and the offending line with a caret under the column."""
    caret = " " * (err.column - 1) + "^"
    return f"{where}:{err.line}:{err.column}: {err.reason}\n    {err.source_line}\n    {caret}"


def load_literals(path: str | Path, module: HloModule) -> list[Any]:
    """Arguments from a ``.npz`` with keys ``arg0..argN-1`` (``--input_literals_file``).

    This is the layout of ``inputs.npz`` in the samples of real XLA runs; ``uint16`` arrays
    for ``bf16`` parameters are taken as bit patterns (how NumPy files hold bf16). Anything
    else (a single ``.npy``, a text file, a damaged entry, missing or extra keys) is a
    :class:`ToolError` naming the file and the problem.
    """
    import zipfile

    from xla_teach.tools.bugs.snapshot import read_npz_array

    path = Path(path)
    if not path.is_file():
        raise ToolError(f"{path}: no such file")
    params = module.entry.parameter_instructions
    expected = [f"arg{i}" for i in range(len(params))]
    layout = f"a .npz archive of arrays {_key_range(expected)}"
    if not zipfile.is_zipfile(path):
        raise ToolError(f"{path}: not {layout} ({_what_file_is(path)})")
    try:
        with np.load(path, allow_pickle=False) as data:
            found = list(data.keys())
            missing = [key for key in expected if key not in found]
            extra = [key for key in found if key not in expected]
            if missing or extra:
                problems = ([f"missing {', '.join(missing)}"] if missing else []) + \
                           ([f"unexpected {', '.join(extra)}"] if extra else [])
                raise ToolError(f"{path}: {'; '.join(problems)} (module {module.name} has {len(params)} "
                                f"parameters; keys found: {', '.join(sorted(found)) or 'none'})")
            args = []
            for key, param in zip(expected, params, strict=True):
                try:
                    array = read_npz_array(data, key)
                except ValueError as err:
                    raise ToolError(f"{path}: not {layout} ({err})") from None
                if not param.shape.is_tuple and param.shape.dtype != array.dtype \
                        and param.shape.dtype.itemsize == array.dtype.itemsize and array.dtype.kind == "u":
                    array = array.view(param.shape.dtype)
                args.append(array)
    except (OSError, zipfile.BadZipFile) as err:
        raise ToolError(f"{path}: not {layout} (a damaged zip file: {err})") from None
    return args


def _key_range(keys: list[str]) -> str:
    """``arg0..arg2`` (or the one key, or ``(none)`` for a module without parameters)."""
    if len(keys) > 1:
        return f"{keys[0]}..{keys[-1]}"
    return keys[0] if keys else "(none: the module has no parameters)"


def _what_file_is(path: Path) -> str:
    """A guess at what a file that is not a zip archive holds, for error messages."""
    with path.open("rb") as file:
        head = file.read(6)
    if head == b"\x93NUMPY":
        return "it is a single .npy array; save the arrays with np.savez instead of np.save"
    return "it is not a zip file"


def arguments_for(loaded: HloInput, use_fake_data: bool, input_literals_file: str = "", seed: int = 0) -> list[Any]:
    """The arguments a tool runs with: a literals file, else the snapshot's, else fake data."""
    from xla_teach.tools.bugs.fake_data import fake_arguments

    if input_literals_file:
        return load_literals(input_literals_file, loaded.module)
    if loaded.arguments is not None and not use_fake_data:
        return list(loaded.arguments)
    if use_fake_data or not loaded.module.entry.parameter_instructions:
        return fake_arguments(loaded.module, seed)
    raise ToolError(f"{loaded.source} is HLO text without arguments: pass --use_fake_data (random inputs) or "
                    "--input_literals_file=inputs.npz")


# ---- compiling ---------------------------------------------------------------------------------
def backend_pipeline(platform: str) -> HloPassPipeline:
    """A fresh copy of the HLO pass pipeline ``platform`` runs (edit it freely)."""
    return backend_info(normalize_platform(platform)).make_pipeline()


def compile_on(module: HloModule, platform: str, pipeline: HloPassPipeline | None = None,
               run_hlo_passes: bool = True) -> Any:
    """Compile ``module`` for ``platform`` with :func:`xla_teach.api.compile_module` (flags, dumps
    and records included); returns an executable (``execute(args)``). ``pipeline`` replaces the
    backend's HLO passes -- the hook for planting a broken pass -- and the backend's code
    generation runs on the result. ``run_hlo_passes=False`` is for modules that are already
    optimized (``--run_test_hlo_passes=false``).
    """
    from xla_teach.api import compile_module
    from xla_teach.backends.options import CompileOptions

    options = CompileOptions.from_flags()
    options.run_hlo_passes = run_hlo_passes
    options.pipeline = pipeline
    return compile_module(module, normalize_platform(platform), options)


def runner_for(platform: str | Runner, pipeline: HloPassPipeline | None = None,
               run_hlo_passes: bool = True) -> Runner:
    """A function ``(module, args) -> outputs`` for a platform name (or a runner, returned as is)."""
    if callable(platform):
        return platform

    def run(module: HloModule, args: list[Any]) -> list[np.ndarray]:
        return compile_on(module, platform, pipeline, run_hlo_passes).execute(list(args))

    return run


def reference_outputs(module: HloModule, args: Sequence[Any]) -> list[np.ndarray]:
    """The interpreter's answer (the oracle), without compiling anything."""
    from xla_teach.hlo.evaluator import evaluate_module

    return evaluate_module(module, list(args))


# ---- printing and comparing ------------------------------------------------------------------
def format_literal(array: Any) -> str:
    """XLA's literal spelling, e.g. ``f32[3] {1, 2, 3}`` or ``s32[] 7``."""
    from xla_teach.hlo.literal import literal_to_text

    if isinstance(array, tuple):
        return "(\n" + ",\n".join(format_literal(a) for a in array) + "\n)"
    array = np.asarray(array)
    ptype = PrimitiveType.from_dtype(array.dtype)
    dims = ",".join(str(d) for d in array.shape)
    return f"{ptype.value}[{dims}] {literal_to_text(array, ptype)}"


@dataclass
class OutputComparison:
    """How one output of the test platform compares with the reference."""

    index: int
    shape: str  # e.g. f32[1024]
    ok: bool
    mismatches: int = 0
    elements: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    first_mismatch: tuple[int, ...] | None = None
    test_value: Any = None  # at the first mismatch
    reference_value: Any = None
    problem: str = ""  # a shape/dtype difference, when the values could not be compared

    def describe(self, test: str = "test", reference: str = "reference") -> str:
        if self.problem:
            return f"output {self.index}: {self.problem}"
        head = f"output {self.index} ({self.shape}): "
        errors = f"max abs error {self.max_abs_error:.6g}, max rel error {self.max_rel_error:.6g}"
        if self.ok:
            return head + f"ok ({errors})"
        where = "{" + ",".join(str(i) for i in self.first_mismatch or ()) + "}"
        return (head + f"{self.mismatches} of {self.elements} elements differ; {errors}; first at {where}: "
                f"{test}={self.test_value} {reference}={self.reference_value}")


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.dtype(f"uint{array.dtype.itemsize * 8}")) if array.dtype.itemsize in (1, 2, 4, 8) else array


def compare_array(index: int, actual: Any, expected: Any, abs_error_bound: float, rel_error_bound: float,
                  exact: bool = False) -> OutputComparison:
    """Compare one output, as XLA's literal comparison does.

    Floats: an element differs when its absolute error exceeds ``abs_error_bound`` *and*
    its relative error exceeds ``rel_error_bound``; NaN equals NaN, infinities must match.
    Integers and ``pred``: exact. ``exact=True``: bit-identical (``replay`` of a snapshot).
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    shape = _shape_text(expected)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return OutputComparison(index, shape, False, problem=f"expected {shape}, got {_shape_text(actual)}")
    n = expected.size
    if exact:
        differ = _bits(actual) != _bits(expected)
        abs_err = rel_err = np.zeros(expected.shape)
    elif expected.dtype.kind == "V" or expected.dtype.kind in "fc":
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        both_nan = np.isnan(a) & np.isnan(e)
        with np.errstate(invalid="ignore", divide="ignore"):
            abs_err = np.where(both_nan | (a == e), 0.0, np.abs(a - e))
            abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)
            rel_err = np.where(abs_err == 0, 0.0, abs_err / np.abs(e))
            rel_err = np.where(np.isnan(rel_err), np.inf, rel_err)
        differ = (abs_err > abs_error_bound) & (rel_err > rel_error_bound)
    else:
        differ = actual != expected
        abs_err = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        with np.errstate(invalid="ignore", divide="ignore"):
            rel_err = np.where(abs_err == 0, 0.0, abs_err / np.abs(expected.astype(np.float64)))
    result = OutputComparison(index, shape, not bool(differ.any()), int(differ.sum()), n,
                              float(abs_err.max()) if n else 0.0, float(rel_err.max()) if n else 0.0)
    if not result.ok:
        first = tuple(int(i) for i in np.argwhere(differ)[0]) if expected.ndim else ()
        result.first_mismatch = first
        result.test_value = actual[first] if expected.ndim else actual[()]
        result.reference_value = expected[first] if expected.ndim else expected[()]
    return result


def compare_outputs(actual: Sequence[Any], expected: Sequence[Any], abs_error_bound: float = 1e-3,
                    rel_error_bound: float = 1e-3, exact: bool = False) -> list[OutputComparison]:
    """One :class:`OutputComparison` per output leaf (a count mismatch is reported as output -1)."""
    if len(actual) != len(expected):
        return [OutputComparison(-1, "", False, problem=f"expected {len(expected)} outputs, got {len(actual)}")]
    return [compare_array(i, a, e, abs_error_bound, rel_error_bound, exact)
            for i, (a, e) in enumerate(zip(actual, expected, strict=True))]


def _shape_text(array: np.ndarray) -> str:
    try:
        element = PrimitiveType.from_dtype(array.dtype).value
    except TypeError:
        element = str(array.dtype)
    return f"{element}[{','.join(str(d) for d in array.shape)}]"


def fresh_path(path: str | Path) -> Path:
    """``path`` if nothing is there yet; else a :class:`ToolError` (tools never overwrite files)."""
    path = Path(path)
    if path.exists():
        raise ToolError(f"{path} already exists; refusing to overwrite it (choose another name or delete it)")
    if not path.parent.exists():
        raise ToolError(f"{path.parent}: no such directory")
    return path
