"""Provenance survives the optimizations: every instruction a pass creates inherits the ``op_name``
and source line of what it replaces (the transposes around a canonicalized convolution, a
simplifier's broadcast, a fusion, a loop's plumbing), so that after optimization no instruction
lacks metadata its origin had; and a gradient's instructions cite the forward line they
differentiate, as JAX attributes them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import xla_teach as xt
import xla_teach.numpy as xnp
from xla_teach.api import compile_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.models import MODELS  # noqa: E402

DATA = Path(__file__).parents[1] / "data"
PLUMBING = ("parameter", "tuple", "get-tuple-element", "constant")
# Computations a reduce, sort, scatter... calls: scalar reducers, which carry no metadata in XLA either.
APPLIERS = ("reduce", "reduce-window", "scatter", "sort", "select-and-scatter", "map", "all-reduce", "reduce-scatter")


def without_metadata(module: HloModule) -> list[str]:
    appliers = {c.name for comp in module.computations for i in comp.instructions if i.opcode in APPLIERS
                for c in i.called_computations()}
    return [f"{comp.name}/{i.name} ({i.opcode})" for comp in module.computations if comp.name not in appliers
            for i in comp.instructions if i.opcode not in PLUMBING and not (i.metadata and i.metadata.op_name)]


@pytest.mark.parametrize("name", list(MODELS))
def test_model_programs_keep_every_op_name_through_the_cpu_pipeline(name: str) -> None:
    step, args = MODELS[name]()
    lowered = xt.jit(step).lower(*args)
    before = parse_hlo(lowered.as_text("hlo"))
    assert without_metadata(before) == [], "the front end gives every instruction an op_name"
    compiled = lowered.compile()
    assert without_metadata(compiled.executable.module) == []
    # ... and so does every stage in between (a pass that drops metadata is named).
    for record in compiled.pass_records():
        if record.changed:
            assert without_metadata(parse_hlo(record.after)) == [], f"after {record.pipeline}/{record.pass_name}"


def assert_keeps_metadata(module: HloModule, backend: str) -> set[str]:
    """Compile ``module``: afterwards an instruction may lack an op_name only if one of its kind
    lacked it in the input (passes rename and clone, so the check is by kind), a fusion only if
    its root does. Returns the kinds that lacked one in the input."""
    lacking = {entry.rsplit("(", 1)[1] for entry in without_metadata(module)}
    optimized = compile_module(module, backend).module
    for entry in without_metadata(optimized):
        name, opcode = entry.split("/", 1)[1].split(" ")[0], entry.rsplit("(", 1)[1]
        if opcode == "fusion)":
            root = next(i for c in optimized.computations for i in c.instructions if i.name == name).fused_computation.root
            assert not (root.metadata and root.metadata.op_name), f"{name}: its root has an op_name, it has none"
        else:
            assert opcode in lacking, f"{entry} lost its op_name"
    return lacking


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_a_jax_training_step_keeps_the_metadata_jax_wrote(backend: str) -> None:
    """JAX gives ten broadcasts of this GPT step no op_name: after optimization only broadcasts (and
    fusions whose root is one) may lack it."""
    module = parse_hlo((DATA / "jax_models" / "gpt_step.hlo").read_text())
    assert assert_keeps_metadata(module, backend) == {"broadcast)"}


CORPUS = sorted(DATA.glob("xla_samples/*/before_optimizations.txt")) + sorted(DATA.glob("xla_optimized/*.txt"))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_module_of_the_corpus_keeps_its_metadata_through_the_cpu_pipeline(path: Path) -> None:
    """The test data's real JAX modules, as JAX lowered them and as XLA optimized them."""
    assert_keeps_metadata(parse_hlo(path.read_text()), "cpu")


def test_a_convolution_keeps_its_op_name_and_line_through_canonicalization() -> None:
    text = """HloModule conv
ENTRY main {
  x = f32[2,8,8,3] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  ROOT c = f32[2,8,8,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, metadata={op_name="jit(f)/conv_general_dilated" source_file="model.py" source_line=12}
}"""
    optimized = compile_module(text, "cpu").module
    convolutions = [i for c in optimized.computations for i in c.instructions if i.opcode in ("convolution", "transpose")]
    assert convolutions
    for instr in convolutions:
        assert instr.metadata.op_name == "jit(f)/conv_general_dilated" and instr.metadata.get("source_line") == 12


def test_the_backward_pass_cites_the_forward_lines_it_differentiates() -> None:
    def loss(w, x):  # type: ignore[no-untyped-def]
        h = xnp.tanh(x @ w)  # FORWARD-1
        return xnp.sum(h * h)  # FORWARD-2

    lines = Path(__file__).read_text().splitlines()
    forward = {n + 1 for n, line in enumerate(lines) if "# FORWARD-" in line and "lines" not in line}
    grad_line = next(n + 1 for n, line in enumerate(lines) if "xt.grad(loss)" in line and "lines" not in line)
    w, x = xnp.ones((4, 3), xnp.float32), xnp.ones((5, 4), xnp.float32)
    text = xt.jit(xt.grad(loss)).lower(w, x).as_text("hlo")  # grad call
    module = parse_hlo(text)
    # The transposes of forward primitives (the seed, 1.0, is made at the grad call: it has its line).
    backward = [i for i in module.entry.instructions if "transpose(jvp(loss))/transpose(" in i.metadata.op_name]
    assert backward
    cited = {i.metadata.get("source_line") for i in backward}
    assert cited <= forward, (cited, forward, grad_line)
    assert cited == forward  # both lines have a transpose: tanh's and the product's, the sum's
