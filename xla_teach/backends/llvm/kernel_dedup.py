"""Identical kernels compiled once: the same code under another name becomes an LLVM alias.

A model's layers repeat: a transformer of eight blocks has eight of every fusion, and even one
block has the same small kernels in several places (a broadcast of zero, an update
``w - 0.1 * g`` of a weight of each shape). Each is emitted under its own instruction's name,
and LLVM would optimize and compile each one. Most of a large module's compile time is LLVM's.
XLA's GPU backend keeps a cache of kernels by their code for the same reason.

Two kernels are the same when their text is. The text taken is the kernel and the internal
functions it calls (its ``.wrapped`` body), with their own names and their local value names
replaced by placeholders in order of appearance. Everything else counts: instructions, types,
constants, attributes (``noalias`` included) and what metadata says (a loop's own ``distinct``
loop-ID node counts by its hints, not its number). The later of two such
kernels is then written as ``@"later" = alias void (ptr, i64, i64), ptr @"first"``. Its runtime
symbol is the first one's code, and internal functions that nothing calls any more are dropped
from the text. ::

    define void @"add.3"(ptr %".1", i64 %".2", i64 %".3") ... { ... call @"add.3.wrapped" ... }
    define internal void @"add.3.wrapped"(ptr noalias %".1", ...) ... { ... }
    define void @"add.7"(...) ... { ... call @"add.7.wrapped" ... }        ; the same code
    define internal void @"add.7.wrapped"(...) ... { ... }
  ->
    define void @"add.3"(...) ... { ... }
    define internal void @"add.3.wrapped"(...) ... { ... }
    @"add.7" = alias void (ptr, i64, i64), ptr @"add.3"
"""

from __future__ import annotations

import re

_DEFINE = re.compile(r'^define (internal )?[^@\n]*@"?([^"(\s]+)"?\(', re.M)
_GLOBAL_REF = re.compile(r'@"([^"]+)"|@([A-Za-z_.$][\w.$]*)')
_LOCAL = re.compile(r'%"[^"]*"|%[A-Za-z_.$][\w.$]*|%\d+')
KERNEL_SIGNATURE = "void (ptr, i64, i64)"
_KERNEL_PARAMS = re.compile(r'^define void @"[^"]+"\(ptr %"?[^,"]+"?, i64 %"?[^,"]+"?, i64 %"?[^,)"]+"?\)')


def _blocks(text: str) -> tuple[list[str], dict[str, tuple[int, bool]]]:
    """The text cut into pieces -- each function's ``define`` with the comment lines right above
    it is one piece -- and for each function: (its piece, internal?)."""
    pieces: list[str] = []
    where: dict[str, tuple[int, bool]] = {}
    pending: list[str] = []  # lines not yet in a piece
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        match = _DEFINE.match(lines[i])
        if not match:
            pending.append(lines[i])
            i += 1
            continue
        comments = 0
        while comments < len(pending) and pending[len(pending) - 1 - comments].startswith(";"):
            comments += 1
        pieces.append("".join(pending[:len(pending) - comments]))
        body = pending[len(pending) - comments:]
        pending = []
        while i < len(lines):
            body.append(lines[i])
            i += 1
            if body[-1].rstrip("\n") == "}":
                break
        pieces.append("".join(body))
        where[match.group(2)] = (len(pieces) - 1, bool(match.group(1)))
    pieces.append("".join(pending))
    return pieces, where


def _callees(body: str, functions: dict[str, tuple[int, bool]]) -> list[str]:
    found = []
    for a, b in _GLOBAL_REF.findall(body):
        name = a or b
        if name in functions and name not in found:
            found.append(name)
    return found


_METADATA_DEF = re.compile(r"^!(\d+) = (.*)$", re.M)
_METADATA_REF = re.compile(r"!(\d+)\b")


def _metadata_meanings(text: str) -> dict[str, str]:
    """``!N`` -> what it says, references inside expanded: every loop has its own ``distinct``
    loop-ID node (``!4 = distinct !{!4, !1}``), so two loops with the same hints differ only by
    that number; expanded, both read ``{SELF, {"llvm.loop.unroll.disable"}}``."""
    raw = {n: body for n, body in _METADATA_DEF.findall(text)}
    meaning: dict[str, str] = {}

    def expand(n: str, depth: int = 0) -> str:
        if n in meaning:
            return meaning[n]
        if n not in raw or depth > 8:
            return f"!{n}"
        body = raw[n].replace("distinct ", "")
        out = _METADATA_REF.sub(lambda m: "SELF" if m.group(1) == n else expand(m.group(1), depth + 1), body)
        meaning[n] = out
        return out

    for n in raw:
        expand(n)
    return meaning


def _key(kernel: str, pieces: list[str], functions: dict[str, tuple[int, bool]],
         metadata: dict[str, str]) -> tuple[str, list[str]]:
    """The kernel's code with its own names and local names replaced, and the internal functions
    it brings along (functions it calls that are not internal keep their names in the key)."""
    closure = [kernel]
    todo = [kernel]
    while todo:
        name = todo.pop()
        body = pieces[functions[name][0]]
        body = body[body.find("define"):]  # without the comment lines
        for callee in _callees(body, functions):
            if callee != name and callee not in closure and functions[callee][1]:
                closure.append(callee)
                todo.append(callee)
    placeholder = {name: f"F{n}" for n, name in enumerate(closure)}
    texts = []
    for name in closure:
        body = pieces[functions[name][0]]
        body = body[body.find("define"):]
        body = _GLOBAL_REF.sub(lambda m: "@" + placeholder.get(m.group(1) or m.group(2), m.group(0)[1:]), body)
        body = _METADATA_REF.sub(lambda m: metadata.get(m.group(1), m.group(0)), body)
        texts.append(_numbered_locals(body))
    return "\n".join(texts), closure


def _numbered_locals(body: str) -> str:
    """``body`` with its local names replaced by ``%v0``, ``%v1``... in order of appearance."""
    local: dict[str, str] = {}
    return _LOCAL.sub(lambda m: local.setdefault(m.group(0), f"%v{len(local)}"), body)


def dedupe_kernels(ir_text: str, kernels: list[str]) -> tuple[str, dict[str, str]]:
    """``ir_text`` with every kernel (of ``kernels``, external functions of the kernel signature)
    whose code equals an earlier one's turned into an alias of it; returns the text and
    ``{alias: kernel it runs}``."""
    pieces, functions = _blocks(ir_text)
    metadata = _metadata_meanings(ir_text)
    first: dict[str, str] = {}
    aliases: dict[str, str] = {}
    dropped: set[str] = set()
    for kernel in kernels:
        if kernel not in functions or functions[kernel][1]:
            continue
        body = pieces[functions[kernel][0]]
        if not _KERNEL_PARAMS.search(body[body.find("define"):body.find("\n", body.find("define"))]):
            continue  # not a kernel's signature: left alone
        key, closure = _key(kernel, pieces, functions, metadata)
        if key not in first:
            first[key] = kernel
            continue
        aliases[kernel] = first[key]
        dropped.update(closure)
    if not aliases:
        return ir_text, {}
    # internal functions only the dropped kernels called go too
    dropped_pieces = {functions[name][0] for name in dropped}
    kept_text = "".join(p for i, p in enumerate(pieces) if i not in dropped_pieces)
    still_called = set(re.findall(r'@"([^"]*)"', kept_text))  # every quoted global the kept code names
    for name in sorted(dropped):
        index, internal = functions[name]
        if name in aliases:
            comment = pieces[index][:pieces[index].find("define")]
            pieces[index] = (f"{comment}; the same code as {aliases[name]}: compiled once\n"
                             f'@"{name}" = alias {KERNEL_SIGNATURE}, ptr @"{aliases[name]}"\n')
        elif internal and name not in still_called:
            pieces[index] = ""
    return "".join(pieces), aliases
