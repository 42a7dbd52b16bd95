"""Bad input files are clear errors naming the file and the problem, never a crash deep inside:
literals files for --input_literals_file (a .npy, a text file, a damaged entry, missing or extra keys)
and snapshots with corrupt metadata or module text; the CLI prints each on one line and exits 2."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.snapshot import SnapshotError, load_snapshot, save_snapshot
from xla_teach.tools.cli import main
from xla_teach.tools.tool_support import ToolError, load_hlo_input, load_literals

TWO_PARAMS = """
HloModule two_params

ENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %y = f32[4]{0} parameter(1)
  ROOT %sum = f32[4]{0} add(%x, %y)
}
"""


def _vector() -> np.ndarray:
    return np.arange(4, dtype=np.float32)


def _cli_error(capsys: pytest.CaptureFixture[str], *argv: Any) -> str:
    """Run the CLI, expect exit status 2 and a one-line message; return that line."""
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "internal error" not in err
    return err


# ---- literals files ------------------------------------------------------------------------------------
def _write_npy(path: Path) -> None:
    with path.open("wb") as file:
        np.save(file, _vector())


def _write_text(path: Path) -> None:
    path.write_text("1 2 3 4\n")


def _write_garbage_entry(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("arg0.npy", b"garbage")
        archive.writestr("arg1.npy", b"garbage")


def _write_object_array(path: Path) -> None:
    np.savez(path, arg0=np.array([1, "a"], dtype=object), arg1=_vector())


@pytest.mark.parametrize("write,problem", [
    (_write_npy, "single .npy array"),
    (_write_text, "not a zip file"),
    (_write_garbage_entry, "entry 'arg0' is not a .npy array"),
    (_write_object_array, "entry 'arg0' is not a readable .npy array"),
])
def test_literals_file_that_is_not_an_npz_of_arrays(tmp_path, write, problem):
    path = tmp_path / "inputs.npz"
    write(path)
    with pytest.raises(ToolError) as info:
        load_literals(path, parse_hlo(TWO_PARAMS))
    message = str(info.value)
    assert message.startswith(f"{path}: not a .npz archive of arrays arg0..arg1")
    assert problem in message


@pytest.mark.parametrize("arrays,problem", [
    ({"arg0": 0, "arg1": 0, "arg5": 0}, "unexpected arg5"),
    ({"arg0": 0}, "missing arg1"),
    ({"arg0": 0, "x": 0}, "missing arg1; unexpected x"),
])
def test_literals_file_keys_are_checked_by_name(tmp_path, arrays, problem):
    path = tmp_path / "in.npz"
    np.savez(path, **{key: _vector() for key in arrays})
    with pytest.raises(ToolError, match=re.escape(f"{path}: {problem}")):
        load_literals(path, parse_hlo(TWO_PARAMS))


def test_valid_literals_file_still_loads(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, arg0=_vector(), arg1=_vector() * 2)
    args = load_literals(path, parse_hlo(TWO_PARAMS))
    np.testing.assert_array_equal(args[1], _vector() * 2)


def test_cli_reports_a_bad_literals_file_on_one_line(tmp_path, capsys):
    hlo, literals = tmp_path / "m.hlo", tmp_path / "in.npy"
    hlo.write_text(TWO_PARAMS)
    _write_npy(literals)
    err = _cli_error(capsys, "replay", hlo, "--input_literals_file", literals)
    assert err.startswith(f"xla-teach replay: error: {literals}: not a .npz archive")


# ---- snapshots -------------------------------------------------------------------------------------------
def _snapshot(path: Path, meta: Any = None, hlo_bytes: bytes | None = None, **arrays: np.ndarray) -> Path:
    """A valid snapshot of TWO_PARAMS, with its metadata, module bytes or arrays replaced as given."""
    save_snapshot(path, TWO_PARAMS, [_vector(), _vector()])
    with np.load(path, allow_pickle=False) as archive:
        entries = dict(archive)
    if meta is not None:
        text = meta if isinstance(meta, str) else json.dumps(meta)
        entries["snapshot_meta"] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    if hlo_bytes is not None:
        entries["hlo_module"] = np.frombuffer(hlo_bytes, dtype=np.uint8)
    entries.update(arrays)
    np.savez(path, **entries)
    return path


def _meta(**changes: Any) -> dict[str, Any]:
    """Valid snapshot metadata for TWO_PARAMS with ``changes`` applied (None removes a field)."""
    meta: dict[str, Any] = {"format": "xla_teach.HloSnapshot", "version": 1, "backend": "", "outputs": None,
                            "arguments": [{"key": "arg0", "hlo_type": "f32[4]"},
                                          {"key": "arg1", "hlo_type": "f32[4]"}], "metadata": {}}
    meta.update(changes)
    return {key: value for key, value in meta.items() if value is not None}


@pytest.mark.parametrize("meta,problem", [
    ("{not json", "snapshot metadata is corrupt: not valid JSON"),
    ([1, 2], "snapshot metadata is corrupt: expected a JSON object, got list"),
    (_meta(arguments=None), "'arguments' must be a list of objects with a 'key'"),
    (_meta(arguments=5), "'arguments' must be a list of objects with a 'key'"),
    (_meta(arguments=["x"]), "'arguments' must be a list of objects with a 'key'"),
    (_meta(arguments=[{"hlo_type": "f32[4]"}]), "'arguments' must be a list of objects with a 'key'"),
    (_meta(arguments=[{"tuple": [{}]}]), "'arguments' must be a list of objects with a 'key'"),
    (_meta(outputs=3), "'outputs' must be null or a list"),
    (_meta(outputs=[{"key": 1}]), "'outputs' must be a list of objects with a 'key'"),
    (_meta(version="2"), "'version' must be an integer, got '2'"),
    (_meta(metadata=[1]), "'metadata' must be an object"),
    (_meta(arguments=[{"key": "arg0", "stored_as": "uint16", "hlo_type": "zz[4]"}]), "bad 'hlo_type'"),
    (_meta(arguments=[{"key": "arg9"}]), "missing the array 'arg9'"),
    (_meta(format="other"), "unknown snapshot format 'other'"),
])
def test_corrupt_snapshot_metadata(tmp_path, meta, problem):
    path = _snapshot(tmp_path / "snap.npz", meta)
    with pytest.raises(SnapshotError) as info:
        load_snapshot(path)
    assert str(info.value).startswith(f"{path}: ")
    assert problem in str(info.value)


def test_snapshot_module_that_is_not_utf8(tmp_path):
    path = _snapshot(tmp_path / "snap.npz", hlo_bytes=b"\xff\xfeHloModule")
    with pytest.raises(SnapshotError, match=re.escape(f"{path}: 'hlo_module' is not UTF-8 text")):
        load_snapshot(path)


def test_snapshot_with_an_unreadable_argument_array(tmp_path):
    path = _snapshot(tmp_path / "snap.npz", arg0=np.array([1, "a"], dtype=object))
    with pytest.raises(SnapshotError, match=re.escape(f"{path}: snapshot is corrupt: entry 'arg0'")):
        load_snapshot(path)


def test_snapshot_module_that_does_not_parse_names_the_file(tmp_path):
    path = _snapshot(tmp_path / "snap.npz", hlo_bytes=b"HloModule oops {")
    with pytest.raises(ToolError, match=re.escape(f"{path} (hlo_module):1:")):
        load_hlo_input(path)


def test_valid_snapshot_still_loads(tmp_path):
    snap = load_snapshot(_snapshot(tmp_path / "snap.npz", _meta()))
    assert len(snap.arguments) == 2 and snap.outputs is None
    np.testing.assert_array_equal(snap.arguments[1], _vector())


@pytest.mark.parametrize("meta", ["{not json", _meta(version="2"), _meta(arguments=5)])
def test_cli_reports_a_corrupt_snapshot_on_one_line(tmp_path, capsys, meta):
    path = _snapshot(tmp_path / "snap.npz", meta)
    err = _cli_error(capsys, "replay", path)
    assert err.startswith(f"xla-teach replay: error: {path}: snapshot metadata is corrupt: ")
