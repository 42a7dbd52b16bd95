"""Split codegen: a large module's kernels compiled by LLVM in two processes at once.

LLVM spends most of a large compile optimizing and generating machine code for the kernels, one
after another, and each kernel is independent of the others. XLA's CPU compiler splits the LLVM
module into parts and compiles them on a thread pool (``--xla_cpu_parallel_codegen_split_count``).
llvmlite cannot do that on threads -- every call into LLVM holds one lock -- so xla_teach does
it with a second process, kept for the life of this one:

1. :func:`split_module` cuts the module text into parts. Each part keeps its own kernels (the
   functions other code calls by name) with every internal function they call, and *declares*
   the other parts' kernels; globals and metadata go to every part (unused ones are dropped by
   LLVM).
2. The worker (``python -m xla_teach.backends.cpu.split_codegen``) optimizes its part and emits
   an object file, while this process does the same with the first part.
3. The worker's object file joins this process's JIT engine (MCJIT links them), so every kernel
   has an address, wherever it was compiled.

On a machine with one core, for a small module, or when the worker cannot start, everything is
compiled here as before: the result is the same machine code either way.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

# A module this large (bytes of LLVM IR text) is worth a second process: its two halves take
# about half a second each; smaller ones compile in less time than the round trip saves.
SPLIT_MIN_BYTES = 400_000

_DEFINE = re.compile(r'^define (?P<linkage>(?:internal|private) )?.*?@(?P<name>"[^"]+"|[\w.$-]+)\(')
_ALIAS = re.compile(r'^@(?P<name>"[^"]+"|[\w.$-]+) = alias (?P<type>[^,]+?) \((?P<params>[^)]*)\), '
                    r'ptr @(?P<target>"[^"]+"|[\w.$-]+)')
_REFERENCE = re.compile(r'@("[^"]+"|[\w.$-]+)')


@dataclass
class _Function:
    name: str
    internal: bool
    text: str
    calls: set[str]

    def declaration(self) -> str:
        """``declare`` with the definition's signature (its first line, up to the parameters' end)."""
        header = self.text.split("\n", 1)[0]
        start = header.index("(", header.index("@" + self.name))
        depth = 0
        for k in range(start, len(header)):
            depth += {"(": 1, ")": -1}.get(header[k], 0)
            if depth == 0:
                break
        signature = header[len("define "):k + 1]
        return "declare " + re.sub(r"^(?:internal |private |dso_local )", "", signature)


def split_module(ir: str, parts: int) -> list[str]:
    """``ir`` as ``parts`` modules, each defining its share of the kernels (balanced by size)."""
    items: list[str | _Function] = []
    lines = ir.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        match = _DEFINE.match(line)
        if match is None:
            items.append(line)
            i += 1
            continue
        end = i
        while lines[end] != "}":
            end += 1
        text = "\n".join(lines[i:end + 1])
        name = match.group("name")
        items.append(_Function(name, bool(match.group("linkage")), text,
                               set(_REFERENCE.findall(text[len(line):])) - {name}))
        i = end + 1
    functions = {f.name: f for f in items if isinstance(f, _Function)}
    reach = {f.name: _reach(f.name, functions) for f in functions.values() if not f.internal}
    groups = _groups(reach)
    weight = [sum(len(functions[n].text) for name in group for n in reach[name][0]) for group in groups]
    owner: dict[str, int] = {}
    sizes = [0] * parts
    for k in sorted(range(len(groups)), key=lambda k: -weight[k]):  # the largest first, each to the lightest part
        part = sizes.index(min(sizes))
        owner.update(dict.fromkeys(groups[k], part))
        sizes[part] += weight[k]
    return [_part(items, reach, owner, p) for p in range(parts)]


def _reach(kernel: str, functions: dict[str, _Function]) -> tuple[set[str], set[str]]:
    """What compiling ``kernel`` takes -- itself and the internal functions it reaches, through
    one another -- and the other kernels those call."""
    body: set[str] = set()
    kernels: set[str] = set()
    todo = [kernel]
    while todo:
        name = todo.pop()
        if name in body or name in kernels or name not in functions:
            continue
        if name != kernel and not functions[name].internal:
            kernels.add(name)
            continue
        body.add(name)
        todo += functions[name].calls
    return body, kernels


def _groups(reach: dict[str, tuple[set[str], set[str]]]) -> list[list[str]]:
    """The kernels in groups that must stay together: a kernel that calls another (through any
    internal function) is compiled with it, so that each part's machine code is complete on its
    own -- this process finishes its part before the worker's arrives."""
    parent = {name: name for name in reach}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for name, (_, called) in reach.items():
        for callee in called:
            parent[root(callee)] = root(name)
    found: dict[str, list[str]] = {}
    for name in reach:
        found.setdefault(root(name), []).append(name)
    return list(found.values())


def _part(items: list[str | _Function], reach: dict[str, tuple[set[str], set[str]]], owner: dict[str, int],
          part: int) -> str:
    keep = set().union(*(reach[name][0] for name, p in owner.items() if p == part))  # its kernels and all they reach
    out = []
    for item in items:
        if isinstance(item, _Function):
            if item.name in keep:
                out.append(item.text)
            elif not item.internal:
                out.append(item.declaration())
            continue
        alias = _ALIAS.match(item)
        if alias is not None and alias.group("target") not in keep:  # the aliased kernel is elsewhere
            out.append(f"declare {alias.group('type')} @{alias.group('name')}({alias.group('params')})")
            continue
        out.append(item)
    return "\n".join(out)


# ---- the worker ---------------------------------------------------------------------------------
def _send(stream: object, *chunks: bytes) -> None:
    for chunk in chunks:
        stream.write(struct.pack("<Q", len(chunk)) + chunk)  # type: ignore[attr-defined]
    stream.flush()  # type: ignore[attr-defined]


def _receive(stream: object) -> bytes:
    head = stream.read(8)  # type: ignore[attr-defined]
    if len(head) != 8:
        raise EOFError("the other side closed the pipe")
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)  # type: ignore[attr-defined]
    if len(data) != size:
        raise EOFError("the other side closed the pipe")
    return data


class CodegenWorker:
    """A second process that compiles LLVM IR text to an object file (its optimized IR too)."""

    def __init__(self) -> None:
        # the child imports this package from where this process did (a checkout need not be installed)
        package_root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen([sys.executable, "-m", "xla_teach.backends.cpu.split_codegen"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        env=env)
        self.busy = threading.Lock()
        self._reply: tuple[bytes, str] | BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, ir: str, opt_level: int, vector_code: bool) -> None:
        """Send ``ir`` off; :meth:`result` waits for its object file (a thread writes and reads, so
        this returns at once, even while the worker is still starting)."""
        def run() -> None:
            try:
                assert self.process.stdin is not None and self.process.stdout is not None
                _send(self.process.stdin, json.dumps({"opt_level": opt_level, "vector_code": vector_code}).encode(),
                      ir.encode())
                status = json.loads(_receive(self.process.stdout))
                if not status["ok"]:
                    raise RuntimeError(f"the codegen worker failed: {status['error']}")
                self._reply = (_receive(self.process.stdout), _receive(self.process.stdout).decode())
            except BaseException as error:  # noqa: BLE001 - handed to the caller, which compiles here instead
                self._reply = error

        self._reply = None
        self._thread = threading.Thread(target=run, name="xla_teach-codegen-worker", daemon=True)
        self._thread.start()

    def result(self) -> tuple[bytes, str]:
        """(object file, optimized IR) of the part sent last; raises what went wrong."""
        assert self._thread is not None
        self._thread.join()
        reply = self._reply
        if isinstance(reply, BaseException) or reply is None:
            raise RuntimeError(f"the codegen worker gave no object file ({reply})")
        return reply

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()  # the worker's loop ends when its input does
            self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001 - at exit: make sure it is gone
            self.process.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()


_worker: CodegenWorker | None = None
_worker_lock = threading.Lock()
_gave_up = False  # a worker failed: this process compiles alone from then on


def worker() -> CodegenWorker | None:
    """The codegen worker of this process, started on first use (None where it cannot run: one
    core, or a worker failed before)."""
    global _worker
    if (os.cpu_count() or 1) < 2 or _gave_up:
        return None
    with _worker_lock:
        if _worker is None:
            try:
                _worker = CodegenWorker()
            except OSError:
                give_up()
                return None
            atexit.register(_worker.close)
        return _worker


def give_up() -> None:
    """Stop using the worker (it failed): every compile of this process runs here from now on."""
    global _worker, _gave_up
    _gave_up = True
    if _worker is not None:
        _worker.process.kill()
        _worker = None


def _serve() -> None:
    """The worker's loop: read a part, compile it, answer with its object file and optimized IR."""
    import llvmlite.binding as llvm

    from xla_teach.backends.cpu.host_target import host_target_machine
    from xla_teach.backends.llvm.kernel_support import optimize_module

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            options = json.loads(_receive(stdin))
            ir = _receive(stdin).decode()
        except EOFError:
            return
        try:
            tm = host_target_machine(options["opt_level"])
            module = llvm.parse_assembly(ir)
            module.triple, module.data_layout = tm.triple, str(tm.target_data)
            module.verify()
            optimize_module(module, tm, options["opt_level"], options["vector_code"])
            _send(stdout, b'{"ok": true}', tm.emit_object(module), str(module).encode())
        except Exception as error:  # noqa: BLE001 - reported to the parent, which compiles the part itself
            _send(stdout, json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}).encode())


if __name__ == "__main__":
    _serve()
