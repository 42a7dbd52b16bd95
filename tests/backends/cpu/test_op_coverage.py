"""Every opcode of the table (xla_teach/hlo/opcodes.py) has an op case that the CPU backend
compiles: the CPU compiles all of HLO, with no fallback to the interpreter (issue 6).

``test_cpu_ops.py`` runs every case against the interpreter; this file makes sure no opcode is
left without a case -- the gap through which ``rng``, ``topk``, ``all-gather`` and
``collective-permute`` once went unnoticed -- and that each opcode's case compiles and leaves no
instruction the CPU cannot run."""

from __future__ import annotations

import functools

import pytest

from tests.backends.op_cases import all_cases
from xla_teach.api import compile_module
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.opcodes import OPCODES
from xla_teach.hlo.text.parser import parse_hlo

CASES = dict(all_cases())
# The pipeline makes fusions; no hand-written case needs to contain one.
MADE_BY_THE_PIPELINE = {"fusion": "softmax_multi_output"}


def _opcodes(text: str) -> set[str]:
    return {i.opcode for comp in parse_hlo(text).computations for i in comp.instructions}


def _first_case_using(opcode: str) -> str | None:
    if opcode in MADE_BY_THE_PIPELINE:
        return MADE_BY_THE_PIPELINE[opcode]
    return next((name for name, text in CASES.items() if opcode in _opcodes(text)), None)


@functools.cache
def _compiled(name: str) -> HloModule:
    return compile_module(CASES[name], "cpu").module


@pytest.mark.parametrize("opcode", sorted(OPCODES))
def test_opcode_has_a_case_the_cpu_compiles(opcode: str) -> None:
    name = _first_case_using(opcode)
    assert name is not None, f"no case in tests/backends/op_cases.py uses '{opcode}'; add one"
    optimized = _compiled(name)
    if opcode in MADE_BY_THE_PIPELINE:
        assert any(i.opcode == opcode for i in optimized.instructions()), optimized.to_text()


def test_no_kernel_less_opcode_reaches_code_generation() -> None:
    """``rng`` is rewritten by the expanders before the CPU emits kernels; ``topk`` only reaches
    code generation where the top-k kernel takes it."""
    from xla_teach.backends.cpu.kernels.topk import topk_parameters

    assert not {i.opcode for i in _compiled("rng_uniform_normal").instructions()} & {"rng"}
    for instr in _compiled("topk_ties").instructions():
        assert instr.opcode != "topk" or topk_parameters(instr) is not None, instr.to_text()
