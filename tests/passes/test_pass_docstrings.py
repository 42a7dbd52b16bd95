"""The before/after examples in the simplifier passes' docstrings (also shown in docs/passes.md)
are real: parse "Before::", run the pass, and compare with "After::"."""

from __future__ import annotations

import inspect

import pytest

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.simplifiers import (
    algebraic_simplifier,
    call_inliner,
    constant_folding,
    cse,
    reshape_mover,
    transpose_folding,
    tuple_simplifier,
)

MODULES = {
    cse: cse.CommonSubexpressionElimination,
    constant_folding: constant_folding.ConstantFolding,
    algebraic_simplifier: algebraic_simplifier.AlgebraicSimplifier,
    reshape_mover: reshape_mover.ReshapeMover,
    transpose_folding: transpose_folding.TransposeFolding,
    tuple_simplifier: tuple_simplifier.TupleSimplifier,
    call_inliner: call_inliner.CallInliner,
}


def _block(doc: str, label: str) -> str:
    """The indented literal block after the line ``label::`` in a docstring, as a module."""
    lines = doc.splitlines()
    assert f"{label}::" in lines, f"no '{label}::' block"
    block = []
    for line in lines[lines.index(f"{label}::") + 1:]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line[4:])
    return "HloModule m\n" + "\n".join(block)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_docstring_example(module: object) -> None:
    doc = inspect.getdoc(module) or ""
    hlo_pass: HloPass = MODULES[module]()
    check_pass(hlo_pass, _block(doc, "Before"), _block(doc, "After"))
