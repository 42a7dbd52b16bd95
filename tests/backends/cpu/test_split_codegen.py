"""Split codegen (backends/cpu/split_codegen.py): a large module's kernels compiled in two parts
at once, the second by a worker process. Each part is a module LLVM accepts on its own, defining
its own kernels and declaring the others; the compiled program's results are bit for bit those of
the module compiled whole; a worker that fails leaves the compile, and the ones after it, to this
process."""

from __future__ import annotations

import os

import llvmlite.binding as llvm
import numpy as np
import pytest

from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.backends.cpu import split_codegen
from xla_teach.backends.cpu.host_target import initialize_llvm
from xla_teach.tools.bugs.fake_data import fake_arguments

IR = """; ModuleID = "m"
@"table" = internal constant [2 x float] [float 1.0, float 2.0]

define void @"big"(ptr %".1") nounwind
{
entry:
  call void @"big.wrapped"(ptr %".1")
  ret void
}

define internal void @"big.wrapped"(ptr %".1") alwaysinline nounwind
{
entry:
  %".2" = getelementptr [2 x float], ptr @"table", i64 0, i64 1
  %".3" = load float, ptr %".2"
  %".4" = fadd float %".3", %".3"
  %".5" = fadd float %".4", %".3"
  store float %".5", ptr %".1"
  ret void
}

define void @"small"(ptr %".1") nounwind
{
entry:
  store float 0x4000000000000000, ptr %".1"
  ret void
}

@"small.copy" = alias void (ptr), ptr @"small"
"""


def test_each_part_defines_its_kernels_with_what_they_call_and_declares_the_rest() -> None:
    initialize_llvm()
    first, second = split_codegen.split_module(IR, 2)
    for part in (first, second):
        llvm.parse_assembly(part).verify()  # each part is a module on its own
    assert 'define void @"big"' in first and 'define internal void @"big.wrapped"' in first
    assert 'declare void @"small"(ptr %".1")' in first and 'declare void @"small.copy"(ptr)' in first
    assert 'define void @"small"' in second and '@"small.copy" = alias' in second
    assert 'declare void @"big"' in second and "big.wrapped" not in second
    assert '@"table"' in first and '@"table"' in second  # globals go everywhere


@pytest.fixture
def split_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(split_codegen, "SPLIT_MIN_BYTES", 0)


SOFTMAX_MLP = """HloModule mlp
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[64,32] parameter(0)
  w = f32[32,48] parameter(1)
  h = f32[64,48] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[64,48] tanh(h)
  lo = f32[] constant(-inf)
  m = f32[64] reduce(t, lo), dimensions={1}, to_apply=max
  mb = f32[64,48] broadcast(m), dimensions={0}
  d = f32[64,48] subtract(t, mb)
  ex = f32[64,48] exponential(d)
  zero = f32[] constant(0)
  s = f32[64] reduce(ex, zero), dimensions={1}, to_apply=add
  sb = f32[64,48] broadcast(s), dimensions={0}
  ROOT r = f32[64,48] divide(ex, sb)
}
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no codegen worker")
def test_a_split_compile_gives_the_whole_compiles_results_bit_for_bit(split_everything: None) -> None:
    split = compile_module(SOFTMAX_MLP, "cpu")
    with flags.override(xla_cpu_parallel_codegen_split_count=1):
        whole = compile_module(SOFTMAX_MLP, "cpu")
    assert split.keep_alive._other_parts and not whole.keep_alive._other_parts
    assert "compiled by the codegen worker process" in split.artifacts.optimized_llvm_ir
    args = fake_arguments(split.module, seed=3)
    for a, b in zip(split.execute(args), whole.execute(args), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_worker_that_fails_leaves_the_compile_to_this_process(split_everything: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        busy = split_codegen.threading.Lock()

        def start(self, *args: object) -> None:
            pass

        def result(self) -> tuple[bytes, str]:
            raise RuntimeError("the codegen worker gave no object file (it died)")

    gave_up: list[bool] = []
    monkeypatch.setattr(split_codegen, "worker", lambda: Broken())
    monkeypatch.setattr(split_codegen, "give_up", lambda: gave_up.append(True))  # (the real one stops the worker)
    executable = compile_module(SOFTMAX_MLP, "cpu")
    assert not executable.keep_alive._other_parts and gave_up == [True]
    args = fake_arguments(executable.module, seed=3)
    with flags.override(xla_cpu_parallel_codegen_split_count=1):
        want = compile_module(SOFTMAX_MLP, "cpu").execute(args)
    np.testing.assert_array_equal(executable.execute(args)[0], want[0])
