"""Findings of the fuzz against XLA's GPU (tests/data/xla_gpu_fuzz): JAX 0.11's HLO text --
cumsum as a `scan`, sorts whose comparator says `order=TOTAL`, `remainder` of infinities -- on
the interpreter and the CPU backend, against the outputs XLA's GPU compiler gave on an H200, with
the fuzzer's own comparison (its tolerances per dtype). Denormals are kept, as XLA's GPU keeps
them. No JAX needed: XLA's answers are stored."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import ml_dtypes
import numpy as np
import pytest

from xla_teach import flags
from xla_teach.api import execute

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = sorted((ROOT / "tests" / "data" / "xla_gpu_fuzz").glob("*/module.hlo"))


def _fuzzer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_against_xla", ROOT / "scripts" / "fuzz_against_xla.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_against_xla", module)
    spec.loader.exec_module(module)
    return module


def _arrays(io: np.lib.npyio.NpzFile, prefix: str) -> list[np.ndarray]:
    keys = sorted((k for k in io.files if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
    return [io[k].view(ml_dtypes.bfloat16) if io[k].dtype.kind == "V" else io[k] for k in keys]


def test_the_findings_are_there() -> None:
    assert len(FINDINGS) == 7


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("module", FINDINGS, ids=lambda p: p.parent.name)
def test_jax_0_11_text_gives_xlas_gpu_answers(module: Path, backend: str) -> None:
    fuzz = _fuzzer()
    lines = (module.parent / "program.txt").read_text().splitlines()
    dtype = lines[0].split(": ")[2].split("[")[0]
    program = fuzz.Program(dtype, [], [fuzz.Op(line.split(" = ")[1].split("(")[0], ()) for line in lines[1:] if " = " in line])
    io = np.load(module.parent / "io.npz")
    with flags.override(xla_teach_flush_denormals=False):
        got = execute(module.read_text(), _arrays(io, "arg"), backend)
    assert fuzz.compare(program, _arrays(io, "out"), got) is None
