"""The code each kernel runs, as the explorer's instruction panel shows it.

A CPU kernel is a small function that loads its buffer pointers and calls ``NAME.wrapped``,
where the loops are; a convolution's kernel calls a runtime-library function
(``xla_teach_conv_f32_2d``), compiled once per process. So "the kernel's code" is several
functions, at several stages. For each kernel symbol this gathers, as ``[title, text]`` sections:

* ``LLVM IR``: the kernel, its ``.wrapped`` function and any other function of the module they
  call, as emitted (values computed for an HLO instruction are named after it:
  ``%"multiply.17" = fmul ...``, which is how the page marks an instruction's own lines);
* ``LLVM IR, optimized``: the same functions after LLVM's pipeline (``.wrapped`` is inlined);
* ``assembly``: the kernel's machine code;
* ``runtime library: NAME``: the IR of each library function the kernel calls, optimized;
* ``PTX``: on the GPU, the kernel's PTX.

Each text is cut at :data:`MAX_LINES` lines. The sections of all kernels are packed into one
zlib-compressed, base64 string (:func:`pack`), which the page inflates when a panel first needs it
(``DecompressionStream``): IR and assembly compress about tenfold, so the page grows by a fraction
of what the text would add.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Iterable
from typing import Any

MAX_LINES = 600  # of one section
_CALL = re.compile(r'call [^@]*@"?([^"(\s]+)"?\(')


def functions(text: str, kind: str) -> dict[str, str]:
    """Function name -> whole text, for LLVM IR (``kind="define"``) or PTX (``".entry"``)."""
    found: dict[str, str] = {}
    lines = text.splitlines()
    pattern = re.compile(r'@"?([^"(\s]+)"?\(' if kind == "define" else r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\w+)")
    starts = ("define",) if kind == "define" else (".entry", ".visible .entry", ".func", ".visible .func")
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(starts):
            continue
        match = pattern.search(line)
        if match is None:
            continue
        body = []
        for following in lines[i:]:
            body.append(following)
            if following.startswith("}"):
                break
        found[match.group(1)] = "\n".join(body)
    return found


def assembly_functions(text: str) -> dict[str, str]:
    """Function name -> its machine code, from an assembly listing (``name:`` ... ``.Lfunc_endN:``)."""
    found: dict[str, str] = {}
    current: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        if current is None:
            match = re.match(r'^"?([^\s":.][^\s":]*)"?:\s*(#.*)?$', line)
            if match:
                current, body = match.group(1), [line]
            continue
        body.append(line)
        if line.startswith(".Lfunc_end") or line.lstrip().startswith(".size"):
            found[current] = "\n".join(body)
            current = None
    return found


def _cut(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= MAX_LINES:
        return text
    return "\n".join(lines[:MAX_LINES]) + f"\n... ({len(lines) - MAX_LINES} more lines: see the dump's .ll / .s files)"


def _with_callees(name: str, defined: dict[str, str]) -> str:
    """``name``'s text and the texts of the functions it calls that are defined beside it."""
    seen: list[str] = []
    todo = [name]
    while todo:
        fn = todo.pop(0)
        if fn in seen or fn not in defined:
            continue
        seen.append(fn)
        todo.extend(_CALL.findall(defined[fn]))
    return "\n\n".join(defined[fn] for fn in seen)


_ALIAS = re.compile(r'^@"?([^"\s=]+)"? = alias [^@]*@"?([^"\s]+)"?', re.M)


def _with_aliases(defined: dict[str, str], text: str) -> dict[str, str]:
    """A kernel compiled once for several instructions (``backends/llvm/kernel_dedup.py``) is an
    alias: its code is the kernel it names, said so in a first line."""
    found = dict(defined)
    for alias, target in _ALIAS.findall(text):
        if target in defined:
            found[alias] = f"; {alias} runs the same code as {target} (identical kernels are compiled once)\n" + \
                defined[target]
    return found


def kernel_code(artifacts: Any, symbols: Iterable[str]) -> dict[str, list[list[str]]]:
    """``{symbol: [[title, text], ...]}`` for every kernel symbol that has code in ``artifacts``."""
    ir = _with_aliases(functions(getattr(artifacts, "llvm_ir", "") or "", "define"),
                       getattr(artifacts, "llvm_ir", "") or "")
    optimized = _with_aliases(functions(getattr(artifacts, "optimized_llvm_ir", "") or "", "define"),
                              getattr(artifacts, "optimized_llvm_ir", "") or "")
    ptx = functions(getattr(artifacts, "ptx", "") or "", ".entry")
    wanted = [s for s in symbols if s in ir or s in ptx]
    assembly = assembly_functions(artifacts.assembly) if wanted and ir and hasattr(artifacts, "assembly") else {}
    extra: dict[str, str] = getattr(artifacts, "extra", {}) or {}
    code: dict[str, list[list[str]]] = {}
    for symbol in wanted:
        sections = []
        if symbol in ir:
            own = _with_callees(symbol, ir)
            sections.append(["LLVM IR", _cut(own)])
            if symbol in optimized:
                sections.append(["LLVM IR, optimized", _cut(_with_callees(symbol, optimized))])
            if symbol in assembly:
                sections.append(["assembly", _cut(assembly[symbol])])
            for callee in dict.fromkeys(_CALL.findall(own)):
                library = extra.get(f"runtime-library.{callee}.ir-with-opt.ll")
                if library:
                    sections.append([f"runtime library: {callee}", _cut(library)])
        if symbol in ptx:
            sections.append(["PTX", _cut(ptx[symbol])])
        code[symbol] = sections
    return code


def pack(code: dict[str, list[list[str]]]) -> str:
    """The sections as base64 of zlib-compressed JSON (what the page inflates)."""
    raw = json.dumps(code, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def unpack(packed: str) -> dict[str, list[list[str]]]:
    """The inverse of :func:`pack` (for tests and tools)."""
    return json.loads(zlib.decompress(base64.b64decode(packed)))
