"""The SPMD partitioner (passes/spmd/): sharded programs become per-device programs that, run on
simulated devices (and CPU devices) on global arrays, give what the program gives on one device;
the fast paths move only what they must (a local dot for data parallelism, partial sums and an
all-reduce for a split contraction or reduction); JAX's own modules before partitioning give
XLA's results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_teach.api import compile_module
from xla_teach.hlo.evaluator import HloEvaluator
from xla_teach.hlo.evaluator.devices import run_devices, run_global
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.spmd import spmd_partitioner
from xla_teach.passes.spmd.spmd_partitioner import SpmdPartitioner, partition

DATA = Path(__file__).parents[1] / "data" / "spmd"
# XLA's SPMD programs (tests/data/spmd/generate.py): sums and a transpose on a 2x2 mesh, data parallelism,
# a matmul on the 2-D mesh, a softmax, a transpose by all-to-all, a gather from a split table, a prefix sum
SPMD_PROGRAMS = sorted(p.stem for p in DATA.glob("*.npz"))

ADD = ("add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n\n"
       "cond {\n  s = (s32[], f32[8,4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
       "  three = s32[] constant(3)\n  ROOT lt = pred[] compare(i, three), direction=LT\n}\n\n"
       "body {\n  s = (s32[], f32[8,4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
       "  one = s32[] constant(1)\n  next = s32[] add(i, one)\n  x = f32[8,4] get-tuple-element(s), index=1\n"
       "  y = f32[8,4] sine(x)\n  ROOT t = (s32[], f32[8,4]) tuple(next, y)\n}\n\n")


def _block(label: str) -> str:
    doc = spmd_partitioner.__doc__ or ""
    text = doc.split(f"{label}")[1].split("::", 1)[1]
    lines = []
    for line in text.splitlines()[1:]:
        if line.strip() and not line.startswith("    "):
            break
        lines.append(line[4:])
    return "\n".join(lines).strip() + "\n"


def test_the_docstring_example() -> None:
    """(Compared as text: the per-device module takes other shapes, so it cannot run on the
    same inputs as the one before.)"""
    got = partition(parse_hlo(_block("Before (``num_partitions=2``)")))
    assert got.to_text() == parse_hlo(_block("After")).to_text()


def _module(params: list[tuple[str, str]], body: str, root_shape: str, devices: int = 4) -> str:
    lines = [f"  p{i} = {shape} parameter({i}), sharding={sharding}" for i, (shape, sharding) in enumerate(params)]
    return f"HloModule m, num_partitions={devices}\n\n{ADD}ENTRY main {{\n" + "\n".join(lines) + f"\n{body}\n}}\n"


CASES = {
    # elementwise on pieces split alike, and one operand resharded to the other's split
    "elementwise": ([("f32[8,6]", "{devices=[2,2]<=[4]}"), ("f32[8,6]", "{devices=[4,1]<=[4]}")],
                    "  e = f32[8,6] exponential(p0)\n  ROOT s = f32[8,6] add(e, p1)"),
    # uneven tiles (7 rows over 4 devices)
    "uneven": ([("f32[7,3]", "{devices=[4,1]<=[4]}")], "  ROOT t = f32[7,3] tanh(p0)"),
    # data parallelism: rows split, the weight whole
    "dot_rows": ([("f32[8,5]", "{devices=[4,1]<=[4]}"), ("f32[5,3]", "{replicated}")],
                 "  ROOT d = f32[8,3] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    # the contraction split on both sides (and replicated twice over a 2x2 mesh)
    "dot_contracting": ([("f32[3,8]", "{devices=[1,2,2]<=[4] last_tile_dim_replicate}"),
                         ("f32[8,5]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}")],
                        "  ROOT d = f32[3,5] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    # columns of the right side split, the left side whole: a local dot
    "dot_columns": ([("f32[4,6]", "{replicated}"), ("f32[6,8]", "{devices=[1,4]<=[4]}")],
                    "  ROOT d = f32[4,8] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    # rows and columns split over the same devices: both operands gathered (XLA's windowed einsum
    # moves one with collective-permutes instead; docs/xla-compatibility.md)
    "dot_other": ([("f32[4,6]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
                   ("f32[6,8]", "{devices=[1,2,2]<=[4] last_tile_dim_replicate}")],
                  "  ROOT d = f32[4,8] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    # reductions over a split and over a whole dimension
    "reduce_split": ([("f32[8,6]", "{devices=[2,2]<=[2,2]T(1,0)}")],
                     "  z = f32[] constant(0)\n  ROOT r = f32[6] reduce(p0, z), dimensions={0}, to_apply=add"),
    "reduce_all": ([("f32[8,6]", "{devices=[2,2]<=[4]}")],
                   "  z = f32[] constant(0)\n  ROOT r = f32[] reduce(p0, z), dimensions={0,1}, to_apply=add"),
    "transpose_then_reshape": ([("f32[4,8]", "{devices=[2,2]<=[4]}")],
                               "  t = f32[8,4] transpose(p0), dimensions={1,0}\n  ROOT r = f32[32] reshape(t)"),
    # slice, pad, concatenate and reverse along dimensions that are not split: local
    "data_movement": ([("f32[8,6]", "{devices=[4,1]<=[4]}"), ("f32[8,2]", "{devices=[4,1]<=[4]}")],
                      "  s = f32[8,4] slice(p0), slice={[0:8], [1:5]}\n  z = f32[] constant(0)\n"
                      "  p = f32[8,7] pad(s, z), padding=0_0x1_2\n  c = f32[8,9] concatenate(p, p1), dimensions={1}\n"
                      "  ROOT r = f32[8,9] reverse(c), dimensions={1}"),
    # reshapes that split or merge the split dimension with others: each device reshapes its rows
    "reshape_split": ([("f32[8,6]", "{devices=[4,1]<=[4]}"), ("f32[8,6]", "{devices=[2,2]<=[4]}")],
                      "  r = f32[4,2,6] reshape(p0)\n  t = f32[4,2,6] tanh(r)\n  m = f32[48] reshape(t)\n"
                      "  q = f32[2,4,2,3] reshape(p1)\n  n = f32[8,6] reshape(q)\n"
                      "  ROOT s = (f32[48], f32[8,6]) tuple(m, n)"),
    # a split vector broadcast into the columns (and a split matrix into a 3-D array)
    "broadcast_split": ([("f32[6]", "{devices=[2,2]<=[4] last_tile_dim_replicate}"),
                         ("f32[8,6]", "{devices=[4,1]<=[4]}")],
                        "  b = f32[4,6] broadcast(p0), dimensions={1}\n  t = f32[4,6] tanh(b)\n"
                        "  c = f32[8,3,6] broadcast(p1), dimensions={0,2}\n"
                        "  ROOT s = (f32[4,6], f32[8,3,6]) tuple(t, c)"),
    # a while loop over split state: body and condition on each device's pieces
    "while_loop": ([("f32[8,4]", "{devices=[4,1]<=[4]}")],
                   "  zero = s32[] constant(0)\n  init = (s32[], f32[8,4]) tuple(zero, p0)\n"
                   "  w = (s32[], f32[8,4]) while(init), condition=cond, body=body\n"
                   "  ROOT r = f32[8,4] get-tuple-element(w), index=1"),
    # a slice of the split dimension: computed whole, from gathered rows
    "slice_split_dimension": ([("f32[8,6]", "{devices=[4,1]<=[4]}")],
                              "  ROOT s = f32[5,6] slice(p0), slice={[1:6], [0:6]}"),
    # rows split four ways to columns split four ways: one all-to-all (on a 2x2 mesh with
    # replication: one per replica group)
    "reshard_all_to_all": ([("f32[8,12]", "{devices=[4,1]<=[4]}")],
                           "  c = f32[8,12] custom-call(p0), custom_call_target=\"Sharding\", sharding={devices=[1,4]<=[4]}\n"
                           "  ROOT n = f32[8,12] negate(c), sharding={devices=[1,4]<=[4]}"),
    "reshard_all_to_all_replicated": (
        [("f32[6,4,10]", "{devices=[1,1,2,2]<=[4] last_tile_dim_replicate}")],
        "  c = f32[6,4,10] custom-call(p0), custom_call_target=\"Sharding\", "
        "sharding={devices=[2,1,1,2]<=[4] last_tile_dim_replicate}\n"
        "  ROOT n = f32[6,4,10] negate(c), sharding={devices=[2,1,1,2]<=[4] last_tile_dim_replicate}"),
    # a Sharding custom call reshards; the ROOT's own sharding is honoured
    "constraint": ([("f32[8,4]", "{devices=[4,1]<=[4]}")],
                   "  c = f32[8,4] custom-call(p0), custom_call_target=\"Sharding\", sharding={devices=[1,4]<=[4]}\n"
                   "  ROOT n = f32[8,4] negate(c), sharding={devices=[2,2]<=[4]}"),
}


def _global_args(text: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.shape.dimensions).astype(np.float32)
            for p in parse_hlo(text).entry.parameter_instructions]


@pytest.mark.parametrize("case", sorted(CASES))
def test_partitioned_programs_give_the_one_device_result(case: str) -> None:
    params, body = CASES[case]
    text = _module(params, body, "")
    args = _global_args(text)
    want = HloEvaluator().evaluate_module(parse_hlo(text.replace("num_partitions=4", "num_partitions=1")), args)
    partitioned = partition(parse_hlo(text))
    got = run_global(partitioned, args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case,collectives", [
    ("dot_rows", {"all-reduce": 0, "all-gather": 0}),
    ("dot_contracting", {"all-reduce": 1, "all-gather": 0}),
    ("reduce_split", {"all-reduce": 1, "all-gather": 0}),
    ("elementwise", {"all-reduce": 0, "all-gather": 1}),  # p1 resharded: gathered, then sliced
    ("dot_columns", {"all-reduce": 0, "all-gather": 0}),
    ("data_movement", {"all-reduce": 0, "all-gather": 0}),
    ("dot_other", {"all-reduce": 0, "all-gather": 2}),  # both operands gathered
    ("while_loop", {"all-reduce": 0, "all-gather": 0}),  # the state stays split across iterations
    ("reshape_split", {"all-reduce": 0, "all-gather": 0}),
    ("broadcast_split", {"all-reduce": 0, "all-gather": 0}),
    ("reshard_all_to_all", {"all-to-all": 1, "all-gather": 0}),
    ("reshard_all_to_all_replicated", {"all-to-all": 1, "all-gather": 0}),
])
def test_the_fast_paths_move_only_what_they_must(case: str, collectives: dict[str, int]) -> None:
    params, body = CASES[case]
    pass_ = SpmdPartitioner()
    module = parse_hlo(_module(params, body, ""))
    pass_.run(module)
    counts = {op: sum(i.opcode == op for i in module.instructions()) for op in collectives}
    assert counts == collectives, module.to_text()
    assert pass_.notes  # every choice is written down


@pytest.mark.parametrize("name", SPMD_PROGRAMS)
def test_jaxs_modules_partitioned_by_xla_teach_give_xlas_results(name: str) -> None:
    """JAX's module before partitioning, partitioned here and run on 4 simulated devices and 4
    CPU devices on the global inputs, gives XLA's global outputs; the data-parallel step is a
    local dot and one all-reduce, as XLA's own partitioning makes it."""
    data = np.load(DATA / f"{name}.npz")
    args = [data[k] for k in sorted(k for k in data.files if k.startswith("global_arg"))]
    want = [data[k] for k in sorted(k for k in data.files if k.startswith("global_out"))]
    partitioned = partition(parse_hlo((DATA / f"{name}.before.txt").read_text()), 4)
    executable = compile_module(partitioned, "cpu")
    on_cpu = run_global(partitioned, args, run=lambda pieces: run_devices(
        4, lambda device: executable.execute(pieces[device.index])))
    for got in (run_global(partitioned, args), on_cpu):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    ops = [i.opcode for i in partitioned.instructions()]
    if name == "data_parallel":
        assert ops.count("all-reduce") == 1 and "all-gather" not in ops
    if name == "transpose_all_to_all":  # XLA's own partitioning uses one all-to-all too
        assert ops.count("all-to-all") == 1 and "all-gather" not in ops
    if name == "gather_split_table":  # the table stays where it is
        assert ops.count("all-reduce") == 1 and "all-gather" not in ops
    moved = {op for op in ops if op in ("all-gather", "all-reduce", "all-to-all", "collective-permute")}
    if name in ("conv_batch", "maxpool_rows"):  # images (rows of windows) stay on their devices
        assert not moved
    if name == "conv_rows":  # one halo row from each neighbour
        assert ops.count("collective-permute") == 2 and moved == {"collective-permute"}


@pytest.mark.parametrize("sharding", ["{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                                      "{devices=[4,1]<=[2,2]T(1,0)}"])
def test_a_lookup_in_a_table_split_by_rows_moves_only_the_rows_looked_up(sharding: str) -> None:
    """An embedding lookup: a local gather of each device's rows, masked, and one all-reduce; out of
    range indices are clamped to the table, as on one device."""
    text = (f"HloModule m, num_partitions=4\n\n{ADD}ENTRY main {{\n"
            f"  t = f32[16,5] parameter(0), sharding={sharding}\n"
            "  i = s32[7,1] parameter(1), sharding={replicated}\n"
            "  ROOT g = f32[7,5] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
            "index_vector_dim=1, slice_sizes={1,5}\n}\n")
    rng = np.random.default_rng(4)
    table = rng.standard_normal((16, 5)).astype(np.float32)
    ids = np.array([[0], [15], [7], [-3], [40], [8], [4]], np.int32)
    want = HloEvaluator().evaluate_module(parse_hlo(text.replace("num_partitions=4", "num_partitions=1")), [table, ids])
    pass_ = SpmdPartitioner()
    module = parse_hlo(text)
    pass_.run(module)
    ops = [i.opcode for i in module.instructions()]
    assert ops.count("all-reduce") == 1 and "all-gather" not in ops, module.to_text()
    assert any("table split by rows" in n for n in pass_.notes)
    (got,) = run_global(module, [table, ids])
    np.testing.assert_array_equal(got, want[0])


MAX = """
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""


@pytest.mark.parametrize("sharding,window,out,reducer,init", [
    # max-pooling 2x2, stride 2, rows split: every window inside a piece, no halo
    ("{devices=[1,4,1,1]<=[4]}", "size=1x2x2x1 stride=1x2x2x1", "2,8,6,3", "max", "-inf"),
    # a SAME 3x3 max filter, rows split four ways: one row from each neighbour, -inf at the ends
    ("{devices=[1,4,1,1]<=[4]}", "size=1x3x3x1 pad=0_0x1_1x1_1x0_0", "2,16,12,3", "max", "-inf"),
    # the same split over rows and columns of a 2x2 mesh: corners come along with the second halo
    ("{devices=[1,2,2,1]<=[4]}", "size=1x3x3x1 pad=0_0x1_1x1_1x0_0", "2,16,12,3", "max", "-inf"),
    # a moving sum of 5 with padding 3 before and 1 after, rows split, replicated twice over
    ("{devices=[1,2,1,1,2]<=[4] last_tile_dim_replicate}", "size=1x5x1x1 pad=0_0x3_1x0_0x0_0", "2,16,12,3",
     "add", "0"),
])
def test_windows_across_a_split_dimension_exchange_halos(sharding: str, window: str, out: str, reducer: str,
                                                          init: str) -> None:
    text = (f"HloModule m, num_partitions=4\n{ADD}{MAX}ENTRY main {{\n"
            f"  x = f32[2,16,12,3] parameter(0), sharding={sharding}\n"
            f"  init = f32[] constant({init})\n"
            f"  ROOT r = f32[{out}] reduce-window(x, init), window={{{window}}}, to_apply={reducer}\n}}\n")
    x = np.random.default_rng(5).standard_normal((2, 16, 12, 3)).astype(np.float32)
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text.replace("num_partitions=4", "num_partitions=1")), [x])
    pass_ = SpmdPartitioner()
    module = parse_hlo(text)
    pass_.run(module)
    ops = [i.opcode for i in module.instructions()]
    assert "all-gather" not in ops, module.to_text()
    halos = sum(1 for n in pass_.notes if "halo" in n)
    assert ops.count("collective-permute") == (0 if "stride" in window else 2 * halos)  # left and right
    executable = compile_module(module, "cpu")
    on_cpu = run_global(module, [x], run=lambda pieces: run_devices(
        4, lambda device: executable.execute(pieces[device.index])))
    for got in (run_global(module, [x]), on_cpu):
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sharding,window,out,permutes", [
    # images split: data parallelism, nothing moves
    ("{devices=[4,1,1,1]<=[4]}", "size=3x3 pad=1_1x1_1", "4,12,10,5", 0),
    # rows split, a SAME 3x3 convolution: one row from each neighbour
    ("{devices=[1,4,1,1]<=[4]}", "size=3x3 pad=1_1x1_1", "4,12,10,5", 2),
    # images over one mesh axis, rows over the other
    ("{devices=[2,2,1,1]<=[4]}", "size=3x3 pad=1_1x1_1", "4,12,10,5", 2),
    # rows split four ways, stride 2: pieces of 3 rows, which the stride does not divide: computed whole
    ("{devices=[1,4,1,1]<=[4]}", "size=4x4 stride=2x2 pad=1_1x1_1", "4,6,5,5", None),
    # rows split two ways, stride 2 (pieces of 6 rows): one row from the left, one from the right
    ("{devices=[1,2,1,1,2]<=[4] last_tile_dim_replicate}", "size=4x4 stride=2x2 pad=1_1x1_1", "4,6,5,5", 2),
])
def test_convolutions_of_split_images_run_locally_with_halos(sharding: str, window: str, out: str,
                                                             permutes: int | None) -> None:
    text = ("HloModule m, num_partitions=4\nENTRY main {\n"
            f"  x = f32[4,12,10,3] parameter(0), sharding={sharding}\n"
            "  w = f32[SIZE,3,5] parameter(1), sharding={replicated}\n"
            f"  ROOT c = f32[{out}] convolution(x, w), window={{{window}}}, dim_labels=b01f_01io->b01f\n}}\n"
            ).replace("SIZE", "4,4" if "4x4" in window else "3,3")
    rng = np.random.default_rng(6)
    args = [rng.standard_normal(p.shape.dimensions).astype(np.float32) for p in parse_hlo(text).entry.parameter_instructions]
    (want,) = HloEvaluator().evaluate_module(parse_hlo(text.replace("num_partitions=4", "num_partitions=1")), args)
    module = parse_hlo(text)
    SpmdPartitioner().run(module)
    ops = [i.opcode for i in module.instructions()]
    if permutes is None:
        assert "all-gather" in ops  # computed whole
    else:
        assert "all-gather" not in ops and ops.count("collective-permute") == permutes, module.to_text()
    executable = compile_module(module, "cpu")
    on_cpu = run_global(module, args, run=lambda pieces: run_devices(
        4, lambda device: executable.execute(pieces[device.index])))
    for got in (run_global(module, args), on_cpu):
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sharding", ["{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                                      "{devices=[4,1]<=[2,2]T(1,0)}"])
def test_updates_into_a_table_split_by_rows_stay_on_the_devices_that_hold_the_rows(sharding: str) -> None:
    """An embedding's gradient (scatter-add of rows): each device adds the updates for its own
    rows; out-of-range indices are skipped on every device, as on one."""
    text = (f"HloModule m, num_partitions=4\n\n{ADD}ENTRY main {{\n"
            f"  t = f32[14,3] parameter(0), sharding={sharding}\n"
            "  i = s32[6,1] parameter(1), sharding={replicated}\n"
            "  u = f32[6,3] parameter(2), sharding={replicated}\n"
            "  ROOT s = f32[14,3] scatter(t, i, u), update_window_dims={1}, inserted_window_dims={0}, "
            "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add, sharding=" + sharding + "\n}\n")
    rng = np.random.default_rng(7)
    table = rng.standard_normal((14, 3)).astype(np.float32)
    ids = np.array([[3], [13], [3], [-1], [14], [7]], np.int32)
    updates = rng.standard_normal((6, 3)).astype(np.float32)
    one = parse_hlo(text.replace("num_partitions=4", "num_partitions=1"))
    (want,) = HloEvaluator().evaluate_module(one, [table, ids, updates])
    pass_ = SpmdPartitioner()
    module = parse_hlo(text)
    pass_.run(module)
    ops = {i.opcode for i in module.instructions()}
    assert not ops & {"all-gather", "all-reduce", "all-to-all", "collective-permute"}, module.to_text()
    assert any("table split by rows" in n for n in pass_.notes)
    (got,) = run_global(module, [table, ids, updates])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


LOOP = """HloModule m, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

cond {
  s = (s32[], f32[8,6], f32[6,6], f32[]) parameter(0)
  total = f32[] get-tuple-element(s), index=3
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  more = pred[] compare(i, n), direction=LT
  big = f32[] constant(1e9)
  small = pred[] compare(total, big), direction=LT
  ROOT go = pred[] and(more, small)
}

body {
  s = (s32[], f32[8,6], f32[6,6], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[8,6] get-tuple-element(s), index=1
  w = f32[6,6] get-tuple-element(s), index=2
  d = f32[8,6] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  y = f32[8,6] tanh(d)
  zero = f32[] constant(0)
  total = f32[] reduce(y, zero), dimensions={0,1}, to_apply=add
  ROOT t = (s32[], f32[8,6], f32[6,6], f32[]) tuple(next, y, w, total)
}

ENTRY main {
  x = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  w = f32[6,6] parameter(1), sharding={replicated}
  zero = s32[] constant(0)
  none = f32[] constant(0)
  init = (s32[], f32[8,6], f32[6,6], f32[]) tuple(zero, x, w, none)
  loop = (s32[], f32[8,6], f32[6,6], f32[]) while(init), condition=cond, body=body
  y = f32[8,6] get-tuple-element(loop), index=1
  total = f32[] get-tuple-element(loop), index=3
  ROOT r = (f32[8,6], f32[]) tuple(y, total)
}
"""


def test_a_loop_over_split_state_runs_its_body_on_each_devices_rows() -> None:
    """Data parallelism inside a loop: the rows stay split across iterations, each iteration's
    product is local and its total one all-reduce; the condition reads the replicated total."""
    rng = np.random.default_rng(8)
    args = [rng.standard_normal((8, 6)).astype(np.float32), (rng.standard_normal((6, 6)) * 0.5).astype(np.float32)]
    want = HloEvaluator().evaluate_module(parse_hlo(LOOP.replace("num_partitions=4", "num_partitions=1")), args)
    pass_ = SpmdPartitioner()
    module = parse_hlo(LOOP)
    pass_.run(module)
    body = next(i for i in module.entry.instructions if i.opcode == "while").attrs["body"]
    assert [i.opcode for i in body.instructions].count("all-reduce") == 1
    assert not any(i.opcode == "all-gather" for i in module.instructions()), module.to_text()
    assert len([c for c in module.computations if c.name.startswith("body")]) == 1  # the old body is gone
    executable = compile_module(module, "cpu")
    on_cpu = run_global(module, args, run=lambda pieces: run_devices(
        4, lambda device: executable.execute(pieces[device.index])))
    for got in (run_global(module, args), on_cpu):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_a_result_wanted_split_is_computed_split_from_the_start() -> None:
    """Backward propagation: the caller wants the rows of tanh(x @ w + b) split; x, w and b come in
    whole. Each device slices its rows of x where it reads them and computes only those rows: no
    collective, and the product is [2,5] per device rather than [8,5]."""
    text = ("HloModule m, num_partitions=4\n\nENTRY main {\n  x = f32[8,3] parameter(0)\n  w = f32[3,5] parameter(1)\n"
            "  b = f32[8,5] parameter(2)\n"
            "  d = f32[8,5] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            "  s = f32[8,5] add(d, b)\n  ROOT t = f32[8,5] tanh(s), sharding={devices=[4,1]<=[4]}\n}\n")
    args = _global_args(text)
    want = HloEvaluator().evaluate_module(parse_hlo(text.replace("num_partitions=4", "num_partitions=1")), args)
    module = parse_hlo(text)
    SpmdPartitioner().run(module)
    ops = [i.opcode for i in module.instructions()]
    assert not {"all-gather", "all-reduce"} & set(ops), module.to_text()
    dot = next(i for i in module.entry.instructions if i.opcode == "dot")
    assert dot.shape.dimensions == (2, 5)
    (got,) = run_global(module, args)
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-5)


BRANCHES = """HloModule m, num_partitions=4

on_true {
  p = (f32[8,6]) parameter(0)
  x = f32[8,6] get-tuple-element(p), index=0
  ROOT t = f32[8,6] tanh(x)
}

on_false {
  p = (f32[8,6]) parameter(0)
  x = f32[8,6] get-tuple-element(p), index=0
  n = f32[8,6] negate(x)
  ROOT m = f32[8,6] multiply(n, x)
}

ENTRY main {
  x = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  which = pred[] parameter(1), sharding={replicated}
  args = (f32[8,6]) tuple(x)
  c = f32[8,6] conditional(which, args, args), true_computation=on_true, false_computation=on_false
  ROOT e = f32[8,6] exponential(c)
}
"""


@pytest.mark.parametrize("which", [True, False])
def test_a_conditional_over_split_operands_runs_each_branch_on_the_pieces(which: bool) -> None:
    x = np.random.default_rng(9).standard_normal((8, 6)).astype(np.float32)
    args = [x, np.array(which)]
    want = HloEvaluator().evaluate_module(parse_hlo(BRANCHES.replace("num_partitions=4", "num_partitions=1")), args)
    pass_ = SpmdPartitioner()
    module = parse_hlo(BRANCHES)
    pass_.run(module)
    assert not any(i.opcode in ("all-gather", "all-reduce") for i in module.instructions()), module.to_text()
    assert any("each branch runs" in n for n in pass_.notes)
    executable = compile_module(module, "cpu")
    on_cpu = run_global(module, args, run=lambda pieces: run_devices(
        4, lambda device: executable.execute(pieces[device.index])))
    for got in (run_global(module, args), on_cpu):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sharding", ["{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"])
def test_a_data_parallel_lookup_in_a_whole_table_needs_nothing_from_other_devices(sharding: str) -> None:
    text = (f"HloModule m, num_partitions=4\n\nENTRY main {{\n"
            "  t = f32[16,5] parameter(0), sharding={replicated}\n"
            f"  i = s32[8,1] parameter(1), sharding={sharding}\n"
            "  g = f32[8,5] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
            "index_vector_dim=1, slice_sizes={1,5}\n  ROOT r = f32[8,5] tanh(g)\n}\n")
    rng = np.random.default_rng(10)
    table = rng.standard_normal((16, 5)).astype(np.float32)
    ids = rng.integers(-2, 18, (8, 1)).astype(np.int32)
    want = HloEvaluator().evaluate_module(parse_hlo(text.replace("num_partitions=4", "num_partitions=1")), [table, ids])
    module = parse_hlo(text)
    SpmdPartitioner().run(module)
    assert not any(i.opcode in ("all-gather", "all-reduce", "all-to-all") for i in module.instructions()), \
        module.to_text()
    gather = next(i for i in module.entry.instructions if i.opcode == "gather")
    assert gather.shape.dimensions[0] < 8  # each device its own lookups
    (got,) = run_global(module, [table, ids])
    np.testing.assert_array_equal(got, want[0])


COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def _collectives(module: HloModule) -> dict[str, int]:
    counts = {kind: 0 for kind in COLLECTIVE_KINDS}
    for instr in module.instructions():
        kind = instr.opcode.removesuffix("-start")
        if kind in counts:
            counts[kind] += 1
    return {kind: n for kind, n in counts.items() if n}


@pytest.mark.parametrize("name", SPMD_PROGRAMS)
def test_xla_teachs_plan_has_xlas_collectives(name: str) -> None:
    """The table of plans: JAX's module before partitioning, compiled by the CPU pipeline (calls
    inlined, partitioned, all-reduces combined), has the same number of each kind of collective as
    XLA's own optimized per-device module of the same program -- a megatron MLP step on the 2x2
    mesh two all-reduces (the batch stays split, the bias is never gathered), the data-parallel
    MLP step with JAX's log_softmax call one."""
    module = parse_hlo((DATA / f"{name}.before.txt").read_text())
    module.header_attributes.setdefault("num_partitions", "4")
    ours = _collectives(compile_module(module, "cpu").module)
    assert ours == _collectives(parse_hlo((DATA / f"{name}.txt").read_text())), ours
