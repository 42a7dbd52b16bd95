"""A student's own pass inside a real compilation: ``CompileOptions(extra_passes=...)`` and
``pipeline_hook`` reach ``jit`` and ``compile_module``; the pass shows up in the stage record
where it was inserted and changes the compiled program as it should."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import xla_teach
from xla_teach.api import compile_module
from xla_teach.backends.options import CompileOptions
from xla_teach.hlo.ir import HloComputation, HloInstruction
from xla_teach.passes.pass_base import HloPass


class AddToSubtract(HloPass):
    """Rewrites every ``add`` into ``subtract`` (a deliberately visible change)."""

    name = "add-to-subtract"

    def run_on_computation(self, comp: HloComputation) -> bool:
        adds = [i for i in comp.instructions if i.opcode == "add"]
        for add in adds:
            comp.replace_instruction(add, HloInstruction("subtract", add.shape, add.operands))
            self.note(f"{add.name} -> subtract")
        return bool(adds)


def _names(records) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{r.pipeline}/{r.pass_name}" for r in records]


def test_extra_pass_before_fusion_runs_inside_jit_and_changes_the_result() -> None:
    x, y = np.arange(6, dtype=np.float32), np.full(6, 2, np.float32)
    options = CompileOptions(extra_passes=[("before:fusion", AddToSubtract())])
    f = xla_teach.jit(lambda x, y: (x + y) * y, backend="cpu", compile_options=options)
    np.testing.assert_array_equal(f(x, y), (x - y) * y)  # the pass turned + into -
    np.testing.assert_array_equal(xla_teach.jit(lambda x, y: (x + y) * y, backend="cpu")(x, y), (x + y) * y)
    records = f.lower(x, y).compile().pass_records()
    names = _names(records)
    mine = names.index("cpu-pipeline/add-to-subtract")
    assert mine < names.index("fusion/fusion")
    assert all(name.startswith(("spmd-partitioning/", "optimization/", "simplification/")) or "-pipeline/" in name
               for name in names[:mine])
    record = records[mine]
    assert record.changed and " add(" in record.before and " subtract(" in record.after
    assert record.notes and record.notes[0].endswith("-> subtract")


def test_pipeline_hook_reaches_compile_module() -> None:
    def hook(pipeline):  # type: ignore[no-untyped-def]
        pipeline.find("simplification").insert_after("algsimp", AddToSubtract())

    text = """HloModule m
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT s = f32[3] add(a, b)
}
"""
    executable = compile_module(text, "cpu", CompileOptions(pipeline_hook=hook))
    a, b = np.array([1, 2, 3], np.float32), np.array([5, 5, 5], np.float32)
    np.testing.assert_array_equal(executable.execute([a, b])[0], a - b)
    assert "simplification/add-to-subtract" in _names(executable.recorder.records)


def test_bad_positions_are_explained() -> None:
    x = np.ones(3, np.float32)
    f = xla_teach.jit(lambda x: x + x, backend="cpu",
                      compile_options=CompileOptions(extra_passes=[("before:fusoin", AddToSubtract())]))
    with pytest.raises(ValueError, match="no pass named 'fusoin' in the cpu-pipeline pipeline"):
        f(x)
    with pytest.raises(ValueError, match="must be 'start', 'end', 'before:NAME' or 'after:NAME'"):
        compile_module("HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n", "cpu",
                       CompileOptions(extra_passes=[("fusion", AddToSubtract())]))
    with pytest.raises(ValueError, match="takes \\(position, pass\\) pairs"):
        compile_module("HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n", "cpu",
                       CompileOptions(extra_passes=[AddToSubtract()]))  # type: ignore[list-item]


def test_the_example_in_docs_passes_md_runs() -> None:
    """docs/passes.md, "Writing your own pass": its python blocks run as written (in order)."""
    page = (Path(__file__).parents[2] / "docs" / "passes.md").read_text()
    section = page[page.index("## Writing your own pass"):page.index("# Fusion, scheduling and buffer")]
    blocks = re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)
    assert len(blocks) == 2
    namespace: dict[str, object] = {"__name__": "docs_passes"}
    for block in blocks:
        exec(compile(block, "docs/passes.md", "exec"), namespace)  # noqa: S102 - our own docs
    hooked = namespace["options"]
    executable = compile_module("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT s = f32[2] add(a, a)\n}\n",
                                "cpu", hooked)  # type: ignore[arg-type]
    assert "simplification/add-to-subtract" in _names(executable.recorder.records)
