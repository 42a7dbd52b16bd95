"""A first-time user's mistakes, each answered with a clear error (or warning) at the right place.

Found by walking README.md, docs/getting-started.md, docs/frontend.md, docs/cli.md and
examples/train_digits.py as a student would. Each test is one mistake that used to end in a
deep traceback, an LLVM abort, or silence; the oracle is NumPy or the user's own source line.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

import xla_teach as xt
import xla_teach.numpy as xnp
from xla_teach import api, flags
from xla_teach.frontend.errors import CompilationError

ROOT = Path(__file__).resolve().parent.parent

SUM_HLO = """HloModule jit_f

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8], y: f32[8]) -> f32[] {
  %x = f32[8]{0} parameter(0)
  %y = f32[8]{0} parameter(1)
  %mul = f32[8]{0} multiply(%x, %y)
  %zero = f32[] constant(0)
  ROOT %total = f32[] reduce(%mul, %zero), dimensions={0}, to_apply=%add_f32
}
"""


# ---- NumPy functions on tracers (docs/frontend.md: "routed to the xnp function of the same name") ----
@pytest.mark.parametrize("fn", [
    lambda a: np.sum(a, axis=0),
    lambda a: np.mean(a),
    lambda a: np.max(a, axis=1),
    lambda a: np.reshape(a, (3, 2)),
    lambda a: np.concatenate([a, a], axis=1),
    lambda a: np.where(a > 2, a, 0.0),
    lambda a: np.transpose(a) * np.shape(a)[0],
], ids=["sum", "mean", "max", "reshape", "concatenate", "where", "transpose-and-shape"])
def test_numpy_functions_on_tracers_match_numpy(fn) -> None:  # type: ignore[no-untyped-def]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(xt.jit(fn)(a), fn(a), rtol=1e-6)


def test_numpy_out_argument_and_value_needing_functions_point_at_the_users_line() -> None:
    def with_out(a):  # type: ignore[no-untyped-def]
        return np.sum(a, out=np.empty((), np.float32))

    def with_median(a):  # type: ignore[no-untyped-def]
        return np.median(a)  # not in xnp: NumPy would need the values

    for fn, what in [(with_out, "out="), (with_median, "converting a traced array")]:
        with pytest.raises(CompilationError, match=what) as info:
            xt.jit(fn)(np.ones(4, np.float32))
        line = inspect.getsourcelines(fn)[1] + 1
        assert f"{__file__}:{line}" in str(info.value)  # the user's line, not NumPy's fromnumeric.py


# ---- shape errors name the operation -----------------------------------------------------------
@pytest.mark.parametrize("fn, op", [(lambda a, b: a + b, "add"), (lambda a, b: a < b, "less"),
                                    (lambda a, b: xnp.where(a > 0, a, b), "where")])
def test_broadcast_errors_name_the_operation_and_shapes(fn, op: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{op}: shapes \(3, 4\) and .*\(5,\) cannot be broadcast"):
        xt.jit(fn)(np.ones((3, 4), np.float32), np.ones(5, np.float32))


def test_an_unhashable_static_argument_is_named_with_a_fix() -> None:
    f = xt.jit(lambda x, n: x * len(n), static_argnums=1)
    with pytest.raises(ValueError, match=r"static argument 1 must be hashable.*got a list \(use a tuple\)"):
        f(np.ones(3, np.float32), [1, 2])
    np.testing.assert_array_equal(f(np.ones(3, np.float32), (1, 2)), np.full(3, 2, np.float32))


# ---- the compile driver -------------------------------------------------------------------------
def test_a_misspelled_disabled_pass_warns_and_a_real_one_does_not() -> None:
    with flags.override(xla_disable_hlo_passes="fusoin"), pytest.warns(UserWarning, match="no pass named 'fusoin'"):
        exe = api.compile_module(SUM_HLO, "cpu")
    assert exe.module.to_text().count("fusion(") >= 1  # nothing was disabled
    with flags.override(xla_disable_hlo_passes="fusion"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exe = api.compile_module(SUM_HLO, "cpu")
    assert "fusion(" not in exe.module.to_text()


def test_bad_debug_level_and_bad_module_type_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_TEACH_DEBUG", "verbose")
    with pytest.raises(flags.FlagError, match="XLA_TEACH_DEBUG takes a level 0..5"):
        api.compile_module(SUM_HLO, "interpreter")
    monkeypatch.delenv("XLA_TEACH_DEBUG")
    with pytest.raises(ValueError, match="needs an HloModule or HLO text, got int"):
        api.compile_module(42, "interpreter")  # type: ignore[arg-type]


# ---- the xla-teach command ----------------------------------------------------------------------
def test_bisect_refuses_a_bad_dump_path_before_bisecting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xla_teach.tools.cli import main

    hlo = tmp_path / "f.hlo"
    hlo.write_text(SUM_HLO)
    argv = ["bisect", str(hlo), "--use_fake_data", "--inject-bug=broken-multiply-to-add"]
    assert main([*argv, f"--dump_path={hlo}"]) == 2
    err = capsys.readouterr()
    assert "is a file, not a folder" in err.err and "stage" not in err.err  # no bisect progress: it never ran
    repro = tmp_path / "repro"
    repro.mkdir()
    (repro / "reproducer.hlo").write_text("mine")
    assert main([*argv, f"--dump_path={repro}"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (repro / "reproducer.hlo").read_text() == "mine"
    assert hlo.read_text() == SUM_HLO


def test_aot_bad_out_dir_and_unknown_cpu_are_errors_not_aborts(tmp_path: Path) -> None:
    from xla_teach.aot.tfcompile import AotError, compile_aot

    a_file = tmp_path / "f.hlo"
    a_file.write_text(SUM_HLO)
    with pytest.raises(AotError, match="is a file, not a folder"):
        compile_aot(SUM_HLO, a_file)
    with pytest.raises(AotError, match="'nonsense' is not a CPU LLVM knows"):  # LLVM used to abort the process
        compile_aot(SUM_HLO, tmp_path / "out", target_cpu="nonsense")
    assert not (tmp_path / "out").exists()
    assert a_file.read_text() == SUM_HLO


# ---- examples/train_digits.py ------------------------------------------------------------------
def _train_digits():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("train_digits_journeys", ROOT / "examples" / "train_digits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_train_digits_checks_the_timeline_folder_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _train_digits().main(["--epochs", "1", "--timeline", str(tmp_path / "missing" / "t.json")])
    assert info.value.code == 2
    assert "does not exist" in capsys.readouterr().err


def test_train_digits_on_gpu_without_one_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from xla_teach.backends.gpu.runtime import device_available

    if device_available():
        pytest.skip("this machine has a GPU")
    assert _train_digits().main(["--epochs", "1", "--backend", "gpu"]) == 2
    assert "no CUDA device/driver" in capsys.readouterr().err


@pytest.mark.gpu
def test_train_digits_on_the_gpu_learns_as_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    """The MNIST-style training example, every step compiled for and run on the device."""
    from xla_teach.backends.gpu.runtime import device_available

    if not device_available():
        pytest.skip("no CUDA device/driver")
    assert _train_digits().main(["--epochs", "2", "--backend", "gpu"]) == 0
    accuracy = float(capsys.readouterr().out.split("test accuracy:")[1].split()[0])
    assert accuracy > 0.85


def test_render_refuses_to_replace_a_drawing_and_says_how_from_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xla_teach.tools.cli import main

    hlo, svg = tmp_path / "f.hlo", tmp_path / "f.svg"
    hlo.write_text(SUM_HLO)
    svg.write_text("mine")
    assert main(["render", str(hlo), "-o", str(svg)]) == 2
    assert "-o" in capsys.readouterr().err  # the CLI has no overwrite=True: point at -o instead
    assert svg.read_text() == "mine"


def test_backend_names_accept_xla_platform_spellings() -> None:
    import numpy as np

    import xla_teach as xt

    text = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n"
    for name in ("Host", "cpu", "Interpreter", "reference"):
        np.testing.assert_array_equal(xt.execute(text, [np.ones(2, np.float32)], backend=name)[0], [-1.0, -1.0])


def test_run_hlo_module_refuses_negative_error_bounds(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from xla_teach.tools.cli import main

    f = tmp_path / "m.txt"
    f.write_text("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n")
    assert main(["run-hlo-module", str(f), "--abs_error_bound=-1"]) == 2
    assert "--abs_error_bound must be >= 0" in capsys.readouterr().err


def test_run_hlo_module_and_bisect_refuse_nan_error_bounds(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A NaN bound would pass every comparison (NaN compares false), hiding any miscompile."""
    from xla_teach.tools.cli import main

    f = tmp_path / "m.txt"
    f.write_text("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n")
    assert main(["run-hlo-module", str(f), "--abs_error_bound=nan"]) == 2
    assert "--abs_error_bound must be >= 0, got nan" in capsys.readouterr().err
    assert main(["bisect", str(f), "--rel_error=nan", "--use_fake_data"]) == 2
    assert "--rel_error must be >= 0, got nan" in capsys.readouterr().err


def test_token_results_and_argument_lists_on_the_cpu() -> None:
    from xla_teach.hlo.evaluator.registry import TOKEN

    text = ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  t = token[] after-all()\n"
            "  ROOT r = (f32[2], token[]) tuple(p, t)\n}\n")
    executable = api.compile_module(text, "cpu")
    got = executable.execute([np.ones(2, np.float32)])
    np.testing.assert_array_equal(got[0], [1.0, 1.0])
    assert got[1] is TOKEN  # as the interpreter returns it; used to be "token has no NumPy dtype"
    with pytest.raises(TypeError, match="takes its arguments as a list"):
        executable.execute(None)  # type: ignore[arg-type]
