"""Emitted code never reads or writes out of bounds.

Two kinds of memory guard catch what a wrong answer might not:

* **guard pages** -- a buffer is placed so that its last byte sits just before a page mapped
  ``PROT_NONE``; touching the element past the end (or element 0 of an *empty* buffer, the
  classic "clamp the index into [0, size-1]" mistake when size is 0) is a segmentation fault.
  Those cases run in a child process, so a fault fails one test instead of killing pytest;
* **sentinels** -- output buffers are carved out of a larger array filled with a sentinel
  byte pattern, checked after the run (catches writes *before* a buffer's start, too).

LLVM's optimizer can delete a load whose value is then discarded, so the guard-page cases are
compiled at ``xla_backend_optimization_level=0`` (the IR as emitted) and, where the simplifier
would remove the op under test, with ``xla_disable_all_hlo_passes``.

GPU kernels cannot run here; their checks look at the emitted LLVM IR and launch dimensions.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import subprocess
import sys

import numpy as np
import pytest

from tests.backends.backend_test_utils import ROOT, assert_same, run_both
from xla_teach import flags
from xla_teach.api import compile_module
from xla_teach.runtime import buffers

# ---------------------------------------------------------------------------------------
# Guard pages (run in a child process)
# ---------------------------------------------------------------------------------------
PAGE = mmap.PAGESIZE
PROT_NONE = 0  # mprotect: no access
_MAPPINGS: list[mmap.mmap] = []  # keep the guarded mappings alive for the whole child process


def guarded_copy(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` whose last byte is followed by an inaccessible page."""
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    pages = -(-array.nbytes // PAGE) + 1
    mapping = mmap.mmap(-1, pages * PAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(base + (pages - 1) * PAGE, PAGE, PROT_NONE) != 0:
        raise OSError(ctypes.get_errno(), "mprotect failed")
    _MAPPINGS.append(mapping)
    copy = np.ndarray(array.shape, array.dtype, buffer=mapping, offset=(pages - 1) * PAGE - array.nbytes)
    copy[...] = array
    return copy


GUARD_CASES: dict[str, tuple[str, list[np.ndarray]]] = {
    # All padding: the clamped load of operand element 0 used to read the empty buffer.
    "pad_of_empty": ("""HloModule m
ENTRY e {
  a = f32[0,3] parameter(0)
  z = f32[] constant(7)
  ROOT p = f32[2,5] pad(a, z), padding=1_1x1_1
}""", [np.zeros((0, 3), np.float32)]),
    "concatenate_with_empty": ("""HloModule m
ENTRY e {
  a = f32[2,0] parameter(0)
  b = f32[2,3] parameter(1)
  c = f32[2,0] parameter(2)
  ROOT r = f32[2,3] concatenate(a, b, c), dimensions={1}
}""", [np.zeros((2, 0), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((2, 0), np.float32)]),
    "reduce_window_of_empty": ("""HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  a = f32[0] parameter(0)
  z = f32[] constant(1)
  ROOT r = f32[3] reduce-window(a, z), window={size=2 pad=2_2}, to_apply=add
}""", [np.zeros(0, np.float32)]),
    "convolution_of_empty": ("""HloModule m
ENTRY e {
  x = f32[1,0,1] parameter(0)
  k = f32[2,1,1] parameter(1)
  ROOT c = f32[1,3,1] convolution(x, k), window={size=2 pad=2_2}, dim_labels=b0f_0io->b0f
}""", [np.zeros((1, 0, 1), np.float32), np.ones((2, 1, 1), np.float32)]),
    "dynamic_update_slice_of_empty_update": ("""HloModule m
fused {
  p0 = f32[4] parameter(0)
  p1 = f32[0] parameter(1)
  p2 = s32[] parameter(2)
  d = f32[4] dynamic-update-slice(p0, p1, p2)
  ROOT n = f32[4] negate(d)
}
ENTRY e {
  a = f32[4] parameter(0)
  u = f32[0] parameter(1)
  i = s32[] parameter(2)
  ROOT f = f32[4] fusion(a, u, i), kind=kLoop, calls=fused
}""", [np.arange(4, dtype=np.float32), np.zeros(0, np.float32), np.array(2, np.int32)]),
    # Partial last chunks/tiles and odd sizes, with every buffer ending at a guard page.
    "column_reduction_partial_chunk": ("""HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  a = f32[5,1031] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[1031] reduce(a, z), dimensions={0}, to_apply=add
}""", [np.linspace(-1, 1, 5 * 1031, dtype=np.float32).reshape(5, 1031)]),
    "sort_odd_size": ("""HloModule m
lt { a = f32[] parameter(0)  b = f32[] parameter(1)  c = s32[] parameter(2)  d = s32[] parameter(3)
     ROOT r = pred[] compare(a, b), direction=LT }
ENTRY e {
  k = f32[3,37] parameter(0)
  v = s32[3,37] parameter(1)
  ROOT s = (f32[3,37], s32[3,37]) sort(k, v), dimensions={1}, is_stable=true, to_apply=lt
}""", [np.random.default_rng(1).standard_normal((3, 37)).astype(np.float32),
       np.arange(3 * 37, dtype=np.int32).reshape(3, 37)]),
    "dot_loops_odd_sizes": ("""HloModule m
ENTRY e {
  a = f32[7,13] parameter(0)
  b = f32[13,5] parameter(1)
  ROOT d = f32[7,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", [np.ones((7, 13), np.float32), np.full((13, 5), 0.5, np.float32)]),
}


def run_guarded_case(name: str) -> None:
    """Child-process body: compile the case as emitted, run it with every parameter and output
    buffer ending at a guard page, compare with the interpreter."""
    text, args = GUARD_CASES[name]

    def take(nbytes: int) -> np.ndarray:
        return guarded_copy(np.zeros(nbytes, np.uint8))

    buffers.OUTPUT_POOL.take = take  # type: ignore[method-assign]
    with flags.override(xla_backend_optimization_level=0, xla_disable_all_hlo_passes=True):
        got, want = run_both(text, [guarded_copy(a) for a in args], "cpu")
    assert_same(got, want, what=name)


@pytest.mark.parametrize("name", sorted(GUARD_CASES))
def test_cpu_kernel_stays_inside_guard_pages(name: str) -> None:
    code = f"from tests.backends.test_bounds import run_guarded_case; run_guarded_case({name!r})"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    crashed = " (killed by a signal: an out-of-bounds access hit the guard page)" if result.returncode < 0 else ""
    assert result.returncode == 0, f"{name}: exit {result.returncode}{crashed}\n{result.stderr[-3000:]}"


# ---------------------------------------------------------------------------------------
# Sentinels around outputs; index semantics at the extremes
# ---------------------------------------------------------------------------------------
GUARD_BYTES = 256
SENTINEL = 0xA5


@pytest.fixture
def sentinel_outputs(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Make every output buffer the middle of a sentinel-filled block; yields the blocks."""
    blocks: list[np.ndarray] = []

    def take(nbytes: int) -> np.ndarray:
        block = buffers.aligned_empty(nbytes + 2 * GUARD_BYTES)
        block[:] = SENTINEL
        blocks.append(block)
        return block[GUARD_BYTES: GUARD_BYTES + nbytes]

    monkeypatch.setattr(buffers.OUTPUT_POOL, "take", take)
    return blocks


def assert_guards_intact(blocks: list[np.ndarray]) -> None:
    assert blocks, "no output buffer went through the guarded pool"
    for block in blocks:
        assert (block[:GUARD_BYTES] == SENTINEL).all(), "a kernel wrote before the start of an output"
        assert (block[-GUARD_BYTES:] == SENTINEL).all(), "a kernel wrote past the end of an output"


SCATTER = """HloModule m
add { x = s32[] parameter(0)  y = s32[] parameter(1)  ROOT r = s32[] add(x, y) }
ENTRY e {
  op = s32[6] parameter(0)
  idx = ITYPE[4,1] parameter(1)
  upd = s32[4,2] parameter(2)
  ROOT s = s32[6] scatter(op, idx, upd), update_window_dims={1}, inserted_window_dims={},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""


@pytest.mark.parametrize("itype,starts", [
    ("s64", [2**63 - 1, 2**63 - 2, 4, -1]),  # start + window size used to wrap to a "valid" negative
    ("u64", [2**64 - 1, 2**63, 4, 5]),        # u64 >= 2^63 used to read as a negative i64
])
def test_scatter_skips_windows_at_extreme_starts(sentinel_outputs: list[np.ndarray], itype: str,
                                                 starts: list[int]) -> None:
    dtype = np.int64 if itype == "s64" else np.uint64
    args = [np.arange(6, dtype=np.int32), np.array(starts, dtype=dtype).reshape(4, 1),
            np.arange(1, 9, dtype=np.int32).reshape(4, 2) * 100]
    got, want = run_both(SCATTER.replace("ITYPE", itype), args, "cpu")
    assert_same(got, want)
    assert_guards_intact(sentinel_outputs)
    # Only the window at start 4 fits (elements 4 and 5); every other window is skipped.
    np.testing.assert_array_equal(want[0], [0, 1, 2, 3, 4 + 500, 5 + 600])


@pytest.mark.parametrize("opcode_text", [
    "ROOT g = f32[2,3] gather(op, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
    "index_vector_dim=1, slice_sizes={1,3}",
    "ROOT g = f32[1,3] dynamic-slice(op, i0, z), dynamic_slice_sizes={1,3}",
])
def test_huge_unsigned_start_indices_clamp_high(opcode_text: str) -> None:
    """A u64 start of 2^63 or more is a *large* index (clamped to the last valid start), as in the
    interpreter and XLA's unsigned comparisons -- not a negative one (clamped to 0)."""
    text = f"""HloModule m
ENTRY e {{
  op = f32[4,3] parameter(0)
  idx = u64[2,1] parameter(1)
  i0 = u64[] parameter(2)
  z = u64[] constant(0)
  {opcode_text}
}}"""
    args = [np.arange(12, dtype=np.float32).reshape(4, 3), np.array([[2**63 + 5], [1]], np.uint64),
            np.array(2**64 - 2, np.uint64)]
    got, want = run_both(text, args, "cpu")
    assert_same(got, want)
    np.testing.assert_array_equal(want[0][0], [9, 10, 11])  # the last row, from the clamped start 3


def test_scatter_window_larger_than_operand_is_skipped(sentinel_outputs: list[np.ndarray]) -> None:
    args = [np.arange(6, dtype=np.int32), np.array([[0], [1], [0], [-3]], np.int64),
            np.arange(1, 9, dtype=np.int32).reshape(4, 2)]
    got, want = run_both(SCATTER.replace("ITYPE", "s64"), args, "cpu")
    assert_same(got, want)
    assert_guards_intact(sentinel_outputs)


def test_dynamic_update_slice_extreme_starts(sentinel_outputs: list[np.ndarray]) -> None:
    text = """HloModule m
ENTRY e {
  a = f32[5,4] parameter(0)
  u = f32[2,3] parameter(1)
  i = s64[] parameter(2)
  j = s64[] parameter(3)
  ROOT d = f32[5,4] dynamic-update-slice(a, u, i, j)
}"""
    for i, j in ((2**63 - 1, -(2**63)), (-1, 2**62), (4, 1)):
        args = [np.zeros((5, 4), np.float32), np.ones((2, 3), np.float32), np.array(i, np.int64),
                np.array(j, np.int64)]
        got, want = run_both(text, args, "cpu")
        assert_same(got, want, what=f"starts ({i}, {j})")
    assert_guards_intact(sentinel_outputs)


# ---------------------------------------------------------------------------------------
# GPU: LLVM IR and launch dimensions (no device needed)
# ---------------------------------------------------------------------------------------
def _gpu(text: str, disable_passes: bool = True):  # type: ignore[no-untyped-def]
    with flags.override(xla_disable_all_hlo_passes=disable_passes):
        return compile_module(text, "gpu")


def _kernel_body(llvm_ir: str, kernel: str) -> str:
    start = llvm_ir.index(f'define ptx_kernel void @"{kernel}"')
    return llvm_ir[start: llvm_ir.index("\n}", start)]


def _launches(executable) -> list[dict]:  # type: ignore[no-untyped-def]
    return [json.loads(i.backend_config)["launch_dimensions"]
            for c in executable.module.computations for i in c.instructions
            if i.backend_config and "launch_dimensions" in i.backend_config]


@pytest.mark.parametrize("layout,kernel", [("{1,0}", "r_1"), ("{0,1}", "r_1")])  # row / per-output-thread
def test_gpu_reduction_with_empty_output_touches_no_memory(layout: str, kernel: str) -> None:
    text = f"""HloModule m
add {{ x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT r = f32[] add(x, y) }}
ENTRY e {{
  a = f32[0,64]{layout} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[0] reduce(a, z), dimensions={{1}}, to_apply=add
}}"""
    executable = _gpu(text)
    body = _kernel_body(executable.artifacts.llvm_ir, kernel)
    assert " load " not in body and " store " not in body, body


@pytest.mark.parametrize("text", [
    """HloModule m
ENTRY e {
  a = f32[0,16] parameter(0)
  b = f32[16,8] parameter(1)
  ROOT d = f32[0,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""",
    """HloModule m
ENTRY e {
  a = f32[0,32,48] parameter(0)
  ROOT t = f32[0,48,32] transpose(a), dimensions={0,2,1}
}""",
])
def test_gpu_empty_outputs_launch_no_empty_grid(text: str) -> None:
    """A zero in the grid is a launch error; empty products and transposes use the loop kernel."""
    for launch in _launches(_gpu(text)):
        assert min(launch["blocks"]) >= 1 and min(launch["threads_per_block"]) >= 1, launch


def test_gpu_loop_kernel_bounds_check_covers_the_vector_path() -> None:
    """4 elements per thread: the check is on the thread id against n / 4 (n divisible by 4)."""
    text = """HloModule m
ENTRY e {
  a = f32[1028] parameter(0)
  ROOT n = f32[1028] negate(a)
}"""
    executable = _gpu(text, disable_passes=False)
    (launch,) = _launches(executable)
    assert launch["blocks"][0] * launch["threads_per_block"][0] * 4 >= 1028
    assert "icmp ult i64" in executable.artifacts.llvm_ir and ", 257" in executable.artifacts.llvm_ir


def test_gpu_sibling_reductions_over_different_dimensions_are_refused() -> None:
    """Each reduction emitter walks the *first* reduction's loops; a sibling reducing other
    dimensions (so with another output shape) would be indexed out of its bounds."""
    text = """HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT r = f32[] add(x, y) }
fused {
  p = f32[8,4] parameter(0)
  z = f32[] constant(0)
  r0 = f32[8] reduce(p, z), dimensions={1}, to_apply=add
  r1 = f32[4] reduce(p, z), dimensions={0}, to_apply=add
  ROOT t = (f32[8], f32[4]) tuple(r0, r1)
}
ENTRY e {
  a = f32[8,4] parameter(0)
  ROOT f = (f32[8], f32[4]) fusion(a), kind=kInput, calls=fused
}"""
    with pytest.raises(NotImplementedError, match="sibling reductions"):
        _gpu(text)
