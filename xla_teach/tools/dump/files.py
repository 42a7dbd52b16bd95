"""Dump file names, the dump folder, and writing without ever overwriting.

Every file of one module is called, as in XLA (``xla/service/dump.cc``)::

    [<timestamp>.]module_<id>.<module name>.<suffix>

``<id>`` is printed ``%04d``. XLA uses the module's unique id, so two runs into
the same folder would collide; xla_teach instead takes the next number after the
highest ``module_NNNN`` already in the folder (any file or folder counts, also
ones written by other processes), so nothing is ever overwritten. Should another
process grab the same number at the same moment, the first file's exclusive
create fails and a fresh number is taken.

Names are sanitized as XLA's ``SanitizeFileName`` does (``/ \\ [ ]`` and space
become ``_``), and the module name is dropped when the whole name would be longer
than 255 characters.
"""

from __future__ import annotations

import re
import sys
import threading
import warnings
from pathlib import Path

# "module_0012.jit_f.txt", "1795375728163386.module_0012....", and JAX's "module_0012.jit_f/" folders.
_MODULE_ENTRY = re.compile(r"^(?:\d+\.)?module_(\d{4,})(?:\.|$)")
_UNSAFE = re.compile(r"[/\\\[\] ]")
MAX_FILE_NAME = 255

_lock = threading.Lock()
_reserved: dict[str, set[int]] = {}  # folder -> ids handed out by this process


class DumpError(ValueError):
    """The dump folder cannot be used (e.g. --xla_dump_to names an existing file)."""


def sanitize_file_name(name: str) -> str:
    """XLA's ``SanitizeFileName``: ``/``, ``\\``, ``[``, ``]`` and space become ``_``."""
    return _UNSAFE.sub("_", name)


def module_ids_in(directory: Path) -> set[int]:
    """The module numbers already present in ``directory`` (files and folders alike)."""
    if not directory.is_dir():
        return set()
    ids = set()
    for entry in directory.iterdir():
        match = _MODULE_ENTRY.match(entry.name)
        if match:
            ids.add(int(match.group(1)))
    return ids


def known_module_ids(directory: Path) -> set[int]:
    """Ids in the folder plus ids this process reserved there but may not have written yet."""
    with _lock:
        reserved = set(_reserved.get(str(directory.resolve()), set()))
    return module_ids_in(directory) | reserved


def reserve_module_id(directory: Path) -> int:
    """The next free module number in ``directory`` (after the highest one present)."""
    key = str(directory.resolve())
    with _lock:
        taken = module_ids_in(directory) | _reserved.get(key, set())
        new_id = max(taken, default=-1) + 1
        _reserved.setdefault(key, set()).add(new_id)
    return new_id


def prepare_directory(dump_to: str) -> Path | None:
    """The dump folder, created if missing; None for ``-`` (dump to stdout)."""
    if dump_to == "-":
        return None
    directory = Path(dump_to).expanduser()
    if directory.exists() and not directory.is_dir():
        raise DumpError(f"--xla_dump_to={dump_to} names a file, not a folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DumpError(f"--xla_dump_to={dump_to}: cannot create the folder ({err.strerror})") from None
    return directory


class DumpWriter:
    """Writes the files of one module: builds each name, never replaces a file.

    ``files`` lists every path written, in order (``None`` folder: printed to stdout
    between ``*** Begin <name> ***`` / ``*** End <name> ***`` lines, as XLA does).
    """

    STDOUT_SUFFIXES = (".txt", ".dot", ".ll", ".s", ".ptx", "debug_options")

    def __init__(self, directory: Path | None, module_name: str, module_id: int, timestamp: int | None) -> None:
        self.directory = directory
        self.module_name = module_name
        self.module_id = module_id
        self.timestamp = timestamp
        self.files: list[Path] = []
        self.printed: list[str] = []
        self._claimed = False  # True once the first file secured this module id

    def file_name(self, suffix: str) -> str:
        prefix = f"{self.timestamp}." if self.timestamp is not None else ""
        name = f"{prefix}module_{self.module_id:04d}.{self.module_name}.{suffix}"
        if len(name) > MAX_FILE_NAME:
            name = f"{prefix}module_{self.module_id:04d}.{suffix}"
        return sanitize_file_name(name)

    def path(self, suffix: str) -> Path | None:
        return None if self.directory is None else self.directory / self.file_name(suffix)

    def write(self, suffix: str, data: str | bytes) -> Path | None:
        """Create the file ``module_XXXX.NAME.<suffix>``; returns its path, or None if skipped."""
        if self.directory is None:
            return self._print(suffix, data)
        for _ in range(100):
            path = self.directory / self.file_name(suffix)
            try:
                with open(path, "xb") as f:
                    f.write(data.encode() if isinstance(data, str) else data)
            except FileExistsError:
                if not self._claimed:  # another dump took this number meanwhile: take the next one
                    self.module_id = reserve_module_id(self.directory)
                    continue
                warnings.warn(f"xla_teach dump: {path} already exists; not overwriting it", stacklevel=3)
                return None
            self._claimed = True
            self.files.append(path)
            return path
        raise DumpError(f"could not find a free module number in {self.directory}")

    def _print(self, suffix: str, data: str | bytes) -> None:
        if isinstance(data, bytes) or not suffix.endswith(self.STDOUT_SUFFIXES):
            return None  # graphs and binary files are not printed (XLA refuses binary formats on stdout)
        name = self.file_name(suffix)
        sys.stdout.write(f"*** Begin {name} ***\n{data}\n*** End {name} ***\n")
        self.printed.append(name)
        return None
