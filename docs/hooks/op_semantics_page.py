"""mkdocs hook: the operation-semantics page, generated from ``xla_teach/hlo/op_semantics.py``
where a page says ``<!-- the operation semantics, generated -->``. Each opcode gets a section
(anchor ``op-<opcode>``, which the explorer's node panel links to) with what it computes, its
operands and attributes from the opcode table, and its example: the module, the arguments, and
the result the interpreter computes at build time (the tests check the same examples against
NumPy on the interpreter and the CPU backend)."""

from __future__ import annotations

from typing import Any

import numpy as np

_MARK = "<!-- the operation semantics, generated -->"
_KIND_TITLES = {
    "elementwise-unary": "Elementwise, one operand", "elementwise-binary": "Elementwise, two operands",
    "elementwise-other": "Elementwise, other", "leaf": "Leaves", "data-movement": "Moving data",
    "contraction": "Contractions", "reduction": "Reductions", "indexing": "Indexing", "sort": "Sorting",
    "tuple": "Tuples", "control": "Control flow and calls", "special": "Side effects, randomness and collectives",
}


def _value(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_value(x) for x in v) + ")"
    a = np.asarray(v)
    return f"{a.dtype}{list(a.shape)} " + np.array2string(a, separator=", ", max_line_width=100).replace("\n", " ")


def _section(opcode: str) -> str:
    from xla_teach.hlo.evaluator import HloEvaluator
    from xla_teach.hlo.op_semantics import SEMANTICS, anchor
    from xla_teach.hlo.opcodes import OPCODES, REQUIRED
    from xla_teach.hlo.text.parser import parse_hlo

    info, entry = OPCODES[opcode], SEMANTICS[opcode]
    operands = "any number" if info.arity is None else str(info.arity)
    attrs = ", ".join(f"`{a.name}`" + ("" if a.default is REQUIRED else " (optional)") for a in info.attrs) or "none"
    lines = [f'<a id="{anchor(opcode)}"></a>', f"### {opcode}", "", entry.summary, "",
             f"Operands: {operands}. Attributes: {attrs}.", ""]
    if entry.example is not None:
        args = [np.asarray(values, dtype=dtype) for values, dtype in entry.example.args]
        result = HloEvaluator().evaluate_module(parse_hlo(entry.example.module), args)
        lines += ["```text", entry.example.module.rstrip(), "```", ""]
        for i, a in enumerate(args):
            lines.append(f"- argument {i}: `{_value(a)}`")
        out = tuple(result) if len(result) > 1 else result[0]
        lines += [f"- result: `{_value(out)}`", ""]
    return "\n".join(lines)


def semantics_markdown() -> str:
    from xla_teach.hlo.opcodes import OPCODES

    by_kind: dict[str, list[str]] = {}
    for opcode in sorted(OPCODES):
        by_kind.setdefault(OPCODES[opcode].kind.value, []).append(opcode)
    parts = []
    for kind, title in _KIND_TITLES.items():
        ops = by_kind.get(kind, [])
        if not ops:
            continue
        parts.append(f"## {title}\n\n" + " · ".join(f"[{op}](#op-{op})" for op in ops) + "\n")
        parts += [_section(op) for op in ops]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if _MARK not in markdown:
        return markdown
    return markdown.replace(_MARK, semantics_markdown())



