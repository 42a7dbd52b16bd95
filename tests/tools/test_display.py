"""Jupyter rich display: the ``_repr_svg_`` / ``_repr_html_`` methods that ``import xla_teach`` installs."""

from __future__ import annotations

import shutil

import pytest

import xla_teach
from tests.tools.dump_test_utils import XLA_DUMP, seed_hlo
from xla_teach.api import compile_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools import render
from xla_teach.tools.render import display

pytestmark = pytest.mark.skipif(not XLA_DUMP.is_dir(), reason="tests/data/xla_samples not present")
needs_dot = pytest.mark.skipif(not render.have_dot(), reason="Graphviz dot not installed")


def test_import_installs_the_reprs():
    assert xla_teach.HloModule._repr_svg_ is display.module_repr_svg
    assert xla_teach.HloComputation._repr_svg_ is display.computation_repr_svg


@needs_dot
def test_module_and_computation_show_as_svg_graphs():
    module = parse_hlo((XLA_DUMP / "module_0000.jit_f.cpu_after_optimizations.txt").read_text())
    svg = module._repr_svg_()
    assert svg.startswith("<svg") and "multiply_add_fusion" in svg and "Fused expression for" in svg
    fused = module.computation("fused_computation")
    comp_svg = fused._repr_svg_()
    assert comp_svg.startswith("<svg") and "mul.0" in comp_svg and "multiply_add_fusion" not in comp_svg


def test_without_graphviz_svg_repr_is_none(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert parse_hlo(seed_hlo())._repr_svg_() is None


@needs_dot
def test_pass_record_recorder_and_executable_html():
    exe = compile_module(seed_hlo(), "cpu")
    fusion = next(r for r in exe.recorder.records if r.pass_name == "fusion")
    record_html = fusion._repr_html_()
    assert "fusion / fusion" in record_html and record_html.count("<svg") == 2 and 'class="diff"' in record_html
    recorder_html = exe.recorder._repr_html_()
    assert recorder_html.startswith("<iframe srcdoc=") and "multi_output_fusion" in recorder_html
    display.install()  # executables are patched once their module is imported
    summary = exe._repr_html_()
    assert "jit_f" in summary and "<code>cpu</code>" in summary and "<svg" in summary
    assert "LLVM IR" in summary and "assembly" in summary
    interp = compile_module(seed_hlo(), "interpreter")
    display.install()
    assert "<code>interpreter</code>" in interp._repr_html_()


@needs_dot
def test_lowered_and_compiled_from_jit_show_in_jupyter():
    import numpy as np

    import xla_teach.numpy as xnp

    @xla_teach.jit
    def seed(x, y, z):
        return xnp.sum(x + y * z)

    x = np.ones(8, np.float32)
    lowered = seed.lower(x, x, x)
    html = lowered._repr_html_()
    assert "jit_seed" in html and "before optimizations" in html and "<svg" in html and "multiply" in html
    compiled_html = lowered.compile()._repr_html_()
    assert "<code>cpu</code>" in compiled_html and "fusion" in compiled_html and "LLVM IR" in compiled_html


def test_gpu_executable_shows_its_ptx_without_a_gpu():
    exe = compile_module(seed_hlo(), "gpu")  # compiling needs no GPU
    display.install()
    html = exe._repr_html_()
    assert "<code>gpu</code>" in html and "PTX" in html and ".entry" in html
