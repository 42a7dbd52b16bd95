"""The before/after examples in the passes' docstrings are real, complete modules.

Students read them first, and the docs' generated pass pages (docs/hooks/pass_pages.py) run the
same "Before::" blocks at build time.

Every pass of the default pipeline and of the CPU and GPU pipelines is covered: its module docstring's
"Before::" block must parse, and running the pass on it must give the "After::" block (compared
after canonical printing, then both run on the interpreter with the same inputs). There are no
exceptions: a new pass without a runnable example fails the test, and so does an example written
as a fragment ("..." for the parts that do not matter, undefined operands)."""

from __future__ import annotations

import inspect
import sys

import pytest

from tests.passes.pass_test_utils import check_pass
from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.backends.gpu.gpu_pipeline import gpu_pipeline
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import HloPass, HloPassPipeline
from xla_teach.passes.pipeline import default_pipeline


def _leaf_passes(pipeline: HloPassPipeline) -> list[HloPass]:
    found: list[HloPass] = []
    for p in pipeline.passes:
        found += _leaf_passes(p) if isinstance(p, HloPassPipeline) else [p]
    return found


def _pipeline_passes() -> dict[str, type[HloPass]]:
    """Pass name -> pass class, over the default and the CPU pipelines."""
    passes: dict[str, type[HloPass]] = {}
    for pipeline in (default_pipeline(), cpu_pipeline(), gpu_pipeline()):
        for p in _leaf_passes(pipeline):
            passes.setdefault(p.name, type(p))
    return passes


PASSES = _pipeline_passes()


def _block(doc: str, label: str) -> str | None:
    """The indented literal block after the paragraph ``label::`` (or ``label (...)::``, over
    several lines) as a module, or None when the docstring has no such block."""
    lines = doc.splitlines()

    def paragraph_start(n: int) -> str:
        while n > 0 and lines[n - 1].strip():
            n -= 1
        return lines[n]

    starts = [n for n, line in enumerate(lines) if line.endswith("::") and paragraph_start(n).startswith(label)]
    if not starts:
        return None
    block = []
    for line in lines[starts[0] + 1:]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line[4:])
    text = "\n".join(block).strip("\n")
    return text if text.startswith("HloModule") else "HloModule m\n\n" + text


def test_every_pipeline_pass_is_covered() -> None:
    assert {"dce", "simplify-while-loops", "while-loop-invariant-code-motion", "fusion", "multi_output_fusion",
            "hlo-memory-scheduler"} <= set(PASSES)


@pytest.mark.parametrize("name", sorted(PASSES))
def test_docstring_example(name: str) -> None:
    doc = inspect.getdoc(sys.modules[PASSES[name].__module__]) or ""
    before, after = _block(doc, "Before"), _block(doc, "After")
    assert before is not None and after is not None, (
        f"pass {name} ({PASSES[name].__module__}) has no 'Before::'/'After::' example in its module docstring; "
        "write one: a whole module, tiny, as XLA would print it")
    # The partitioner's "after" is a per-device program: it computes the same on each device's piece,
    # which tests/passes/test_spmd_partitioner.py checks over the devices; here, the text.
    module = check_pass(PASSES[name](), before, after, semantics=name != "spmd-partitioning")
    assert module.is_scheduled == parse_hlo(after).is_scheduled
