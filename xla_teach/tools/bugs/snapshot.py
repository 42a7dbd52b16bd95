"""HLO snapshots: a module plus the arguments it ran on (and the results it gave), in one file.

XLA writes an ``HloSnapshot`` protobuf (``module_0000.jit_f.snapshot.0.pb``) when
``--xla_dump_hlo_snapshots`` is on, so that a bug report carries everything needed
to rerun the exact execution with ``replay_computation``. xla_teach does the same
with a file NumPy can read on its own, so students can open it without xla_teach::

    module_0000.jit_f.snapshot.0.npz      (a .npz is a zip of .npy files)
      hlo_module        uint8[N]   the module's HLO text, UTF-8 (constants printed in full)
      snapshot_meta     uint8[M]   JSON: format, version, backend, module name, metadata,
                                   and the structure/type of every argument and output
      arg0, arg1, ...              one array per ENTRY parameter (tuple parameters: arg1.0, arg1.1, ...)
      out0, out1, ...              the leaves of the ENTRY result, in tuple order

Types NumPy cannot save natively (``bf16`` from ml_dtypes) are stored as unsigned
integers holding the same bits (``uint16`` for bf16) and turned back on load; the
JSON records each array's HLO type (``bf16[2,3]``) so nothing is guessed. No
pickles: ``np.load(path)`` (``allow_pickle=False``) reads every entry safely.

``save_snapshot`` never overwrites an existing file unless asked to.
"""

from __future__ import annotations

import datetime
import io
import json
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.types import PrimitiveType

SNAPSHOT_SUFFIX = ".npz"  # dump files are named module_XXXX.NAME.snapshot.N.npz
FORMAT_NAME = "xla_teach.HloSnapshot"
FORMAT_VERSION = 1


class SnapshotError(ValueError):
    """A snapshot file that is missing, unreadable, or not in xla_teach's format."""


@dataclass
class HloSnapshot:
    """One recorded execution: module text, arguments, outputs and how it was run.

    ``arguments`` holds one value per ENTRY parameter (an array, or a tuple for a
    tuple-shaped parameter); ``outputs`` the leaves of the result (None when the
    snapshot was taken before running). ``metadata`` is free-form JSON (flags, notes).
    """

    module_text: str
    arguments: list[Any]
    outputs: list[np.ndarray] | None = None
    backend: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def module_name(self) -> str:
        return self.module().name

    def module(self) -> HloModule:
        """Parse the stored HLO text (a fresh module on every call)."""
        from xla_teach.hlo.text.parser import parse_hlo

        return parse_hlo(self.module_text)

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        return save_snapshot(path, self.module_text, self.arguments, self.outputs, overwrite=overwrite,
                             backend=self.backend, **self.metadata)


# ---- encoding values ---------------------------------------------------------------------
def _hlo_type(array: np.ndarray) -> str:
    try:
        element = PrimitiveType.from_dtype(array.dtype).value
    except TypeError as err:
        raise SnapshotError(f"cannot store an array of dtype {array.dtype} in a snapshot: {err}") from None
    return f"{element}[{','.join(str(d) for d in array.shape)}]"


def _encode(value: Any, key: str, arrays: dict[str, np.ndarray]) -> Any:
    """Put ``value``'s leaves into ``arrays`` under ``key`` (``key.i`` for tuple elements);
    return the JSON description of its structure."""
    if isinstance(value, tuple | list):
        return {"tuple": [_encode(v, f"{key}.{i}", arrays) for i, v in enumerate(value)]}
    array = np.asarray(value)
    entry: dict[str, Any] = {"key": key, "hlo_type": _hlo_type(array)}
    if array.dtype.kind == "V":  # ml_dtypes (bf16): NumPy would save it as raw void bytes
        bits = np.dtype(f"uint{array.dtype.itemsize * 8}")
        entry["stored_as"] = bits.name
        array = array.view(bits)
    arrays[key] = np.array(array, order="C")  # (np.ascontiguousarray would make a scalar 1-d)
    return entry


def _decode(desc: Any, arrays: Any, field: str) -> Any:
    """The value ``desc`` (one entry of the JSON list ``field``) describes, read from ``arrays``."""
    if isinstance(desc, dict) and isinstance(desc.get("tuple"), list):
        return tuple(_decode(d, arrays, field) for d in desc["tuple"])
    if not isinstance(desc, dict) or not isinstance(desc.get("key"), str):
        raise SnapshotError(f"snapshot metadata is corrupt: '{field}' must be a list of objects with a 'key' "
                            f"(or a 'tuple' list), got {desc!r}")
    key = desc["key"]
    if key not in arrays:
        raise SnapshotError(f"snapshot is missing the array '{key}'")
    try:
        array = read_npz_array(arrays, key)
    except ValueError as err:
        raise SnapshotError(f"snapshot is corrupt: {err}") from None
    if desc.get("stored_as"):
        try:
            element = str(desc.get("hlo_type", "")).split("[", 1)[0]
            array = array.view(PrimitiveType.from_name(element).dtype)
        except ValueError as err:
            raise SnapshotError(f"snapshot array '{key}' has a bad 'hlo_type': {err}") from None
    return array


def read_npz_array(archive: Any, key: str) -> np.ndarray:
    """``archive[key]`` of an open ``.npz``, or a ValueError saying why that entry is not a readable array.

    ``np.load`` hands back raw bytes for an entry that is not a ``.npy`` file, and raises
    assorted errors for a damaged one; both become one message naming the entry.
    """
    try:
        array = archive[key]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise ValueError(f"entry '{key}' is not a readable .npy array ({err})") from None
    if not isinstance(array, np.ndarray):
        raise ValueError(f"entry '{key}' is not a .npy array")
    return array


def _text_entry(archive: Any, key: str) -> str:
    """A UTF-8 text stored as ``uint8`` bytes (``hlo_module``, ``snapshot_meta``)."""
    try:
        return read_npz_array(archive, key).tobytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise SnapshotError(f"'{key}' is not UTF-8 text (byte {err.start}); the snapshot is corrupt") from None
    except ValueError as err:
        raise SnapshotError(str(err)) from None


def _read_header(archive: Any) -> dict[str, Any]:
    """The JSON of ``snapshot_meta``, checked field by field (a SnapshotError names the bad one)."""
    corrupt = "snapshot metadata is corrupt: "
    try:
        header = json.loads(_text_entry(archive, "snapshot_meta"))
    except json.JSONDecodeError as err:
        raise SnapshotError(f"{corrupt}not valid JSON ({err})") from None
    if not isinstance(header, dict):
        raise SnapshotError(f"{corrupt}expected a JSON object, got {type(header).__name__}")
    if header.get("format") != FORMAT_NAME:
        raise SnapshotError(f"unknown snapshot format {header.get('format')!r}")
    version = header.get("version", 0)
    if not isinstance(version, int):
        raise SnapshotError(f"{corrupt}'version' must be an integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise SnapshotError(f"snapshot version {version} is newer than this xla_teach understands ({FORMAT_VERSION})")
    if not isinstance(header.get("arguments"), list):
        raise SnapshotError(f"{corrupt}'arguments' must be a list of objects with a 'key'")
    if header.get("outputs") is not None and not isinstance(header["outputs"], list):
        raise SnapshotError(f"{corrupt}'outputs' must be null or a list of objects with a 'key'")
    if not isinstance(header.get("metadata", {}), dict):
        raise SnapshotError(f"{corrupt}'metadata' must be an object")
    return header


def _bytes_array(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


# ---- public API -----------------------------------------------------------------------------
def save_snapshot(path: str | Path, module: HloModule | str, args: list[Any], outputs: list[Any] | None = None,
                  overwrite: bool = False, **meta: Any) -> Path:
    """Write one snapshot file to ``path`` (conventionally ending in ``.npz``); returns the path.

    ``module`` is an HloModule or its HLO text. Keyword ``backend=`` names the platform the
    values came from; every other keyword goes into the JSON metadata (it must be
    JSON-serializable; anything else is stored as its ``str``).
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise SnapshotError(f"{path} already exists; refusing to overwrite it")
    text = module if isinstance(module, str) else module.to_text(print_large_constants=True)
    backend = str(meta.pop("backend", ""))
    arrays: dict[str, np.ndarray] = {}
    argument_tree = [_encode(a, f"arg{i}", arrays) for i, a in enumerate(args)]
    output_tree = None if outputs is None else [_encode(o, f"out{i}", arrays) for i, o in enumerate(outputs)]
    header = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "backend": backend,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "arguments": argument_tree, "outputs": output_tree, "metadata": meta,
    }
    arrays["hlo_module"] = _bytes_array(text)
    arrays["snapshot_meta"] = _bytes_array(json.dumps(header, default=str, indent=1))
    buffer = io.BytesIO()  # np.savez would append ".npz" to a path without it; write exactly `path`
    np.savez(buffer, **arrays)
    path.write_bytes(buffer.getvalue())
    return path


def is_snapshot_file(path: str | Path) -> bool:
    """True for a zip file holding ``hlo_module.npy`` (an xla_teach snapshot)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return "hlo_module.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def load_snapshot(path: str | Path) -> HloSnapshot:
    """Read a file written by :func:`save_snapshot`."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"{path}: no such file")
    if path.suffix == ".pb":
        raise SnapshotError(f"{path}: binary HloSnapshot protos from XLA are not supported; "
                            "use the HLO text dump (module_XXXX.*.txt) with --use_fake_data instead")
    if not zipfile.is_zipfile(path):
        raise SnapshotError(f"{path}: not an xla_teach snapshot (expected a .npz file from save_snapshot)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            if "hlo_module" not in archive or "snapshot_meta" not in archive:
                raise SnapshotError("a .npz file but not an xla_teach snapshot (no hlo_module/snapshot_meta)")
            text = _text_entry(archive, "hlo_module")
            header = _read_header(archive)
            arguments = [_decode(d, archive, "arguments") for d in header["arguments"]]
            outputs = None if header.get("outputs") is None else [_decode(d, archive, "outputs")
                                                                  for d in header["outputs"]]
    except SnapshotError as err:
        raise SnapshotError(f"{path}: {err}") from None
    except (OSError, zipfile.BadZipFile) as err:
        raise SnapshotError(f"{path}: a damaged .npz file ({err})") from None
    metadata = dict(header.get("metadata", {}))
    metadata.setdefault("created", header.get("created", ""))
    return HloSnapshot(text, arguments, outputs, str(header.get("backend", "")), metadata)
