"""Snapshots: one .npz holding module text, arguments and outputs; exact round trips (bf16 included),
no pickles, no overwriting, and a dumped snapshot replays to bit-identical outputs."""

from __future__ import annotations

import zipfile

import ml_dtypes
import numpy as np
import pytest

from xla_teach import flags
from xla_teach.api import execute
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.bugs.replay import replay
from xla_teach.tools.bugs.snapshot import HloSnapshot, SnapshotError, is_snapshot_file, load_snapshot, save_snapshot

MIXED = """
HloModule mixed

ENTRY %main (a: bf16[4], b: (f32[2], s32[3]), c: pred[2]) -> bf16[4] {
  %a = bf16[4]{0} parameter(0)
  %b = (f32[2]{0}, s32[3]{0}) parameter(1)
  %c = pred[2]{0} parameter(2)
  ROOT %neg = bf16[4]{0} negate(%a)
}
"""

BF16_MUL = """
HloModule bf16_mul

ENTRY %main (x: bf16[16], y: bf16[16]) -> (bf16[16], f32[]) {
  %x = bf16[16]{0} parameter(0)
  %y = bf16[16]{0} parameter(1)
  %m = bf16[16]{0} multiply(%x, %y)
  %wide = f32[16]{0} convert(%m)
  %zero = f32[] constant(0)
  %s = f32[] reduce(%wide, %zero), dimensions={0}, to_apply=%add
  ROOT %t = (bf16[16]{0}, f32[]) tuple(%m, %s)
}

%add (p: f32[], q: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  %q = f32[] parameter(1)
  ROOT %r = f32[] add(%p, %q)
}
"""


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_round_trip_keeps_types_shapes_and_bits(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(4).astype(ml_dtypes.bfloat16)
    a[0] = np.nan
    b = (rng.standard_normal(2).astype(np.float32), np.array([1, -2, 3], np.int32))
    c = np.array([True, False])
    out = -a
    path = save_snapshot(tmp_path / "s.npz", parse_hlo(MIXED), [a, b, c], [out], backend="cpu", note="hello")
    snap = load_snapshot(path)
    assert snap.backend == "cpu" and snap.metadata["note"] == "hello"
    assert snap.module().to_text() == parse_hlo(MIXED).to_text()
    assert _bits_equal(snap.arguments[0], a)
    assert isinstance(snap.arguments[1], tuple)
    assert _bits_equal(snap.arguments[1][0], b[0]) and _bits_equal(snap.arguments[1][1], b[1])
    assert _bits_equal(snap.arguments[2], c)
    assert _bits_equal(snap.outputs[0], out)


def test_file_is_plain_numpy_without_pickles(tmp_path):
    path = save_snapshot(tmp_path / "s.npz", MIXED, [np.ones(4, ml_dtypes.bfloat16),
                         (np.zeros(2, np.float32), np.zeros(3, np.int32)), np.zeros(2, bool)], None)
    with np.load(path, allow_pickle=False) as data:  # raises if anything needed a pickle
        assert data["arg0"].dtype == np.uint16  # bf16 bits
        assert list(data["arg0"]) == [0x3F80] * 4  # 1.0 in bf16
        assert data["hlo_module"].tobytes().decode() == MIXED
        assert "out0" not in data
    assert is_snapshot_file(path) and zipfile.is_zipfile(path)
    assert load_snapshot(path).outputs is None


def test_scalar_outputs_stay_scalars(tmp_path):
    path = save_snapshot(tmp_path / "s.npz", MIXED, [], [np.float32(2.5)])
    assert load_snapshot(path).outputs[0].shape == ()


def test_never_overwrites(tmp_path):
    target = tmp_path / "s.npz"
    target.write_text("precious")
    with pytest.raises(SnapshotError, match="already exists"):
        save_snapshot(target, MIXED, [], None)
    assert target.read_text() == "precious"
    save_snapshot(target, MIXED, [], None, overwrite=True)
    assert is_snapshot_file(target)


@pytest.mark.parametrize("content,message", [(None, "no such file"), (b"HloModule m", "not an xla_teach snapshot")])
def test_bad_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "x.npz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SnapshotError, match=message):
        load_snapshot(path)


def test_other_npz_is_rejected(tmp_path):
    np.savez(tmp_path / "inputs.npz", arg0=np.zeros(3))
    with pytest.raises(SnapshotError, match="not an xla_teach snapshot"):
        load_snapshot(tmp_path / "inputs.npz")


def test_snapshot_object_save(tmp_path):
    snap = HloSnapshot(MIXED, [], [np.arange(3, dtype=np.int32)], "interpreter", {"k": 1})
    again = load_snapshot(snap.save(tmp_path / "o.npz"))
    assert again.metadata["k"] == 1 and again.backend == "interpreter"
    assert _bits_equal(again.outputs[0], snap.outputs[0])


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_dumped_snapshot_replays_bit_identical(tmp_path, backend):
    """--xla_dump_hlo_snapshots writes module+args+results; replay on the same backend reproduces them."""
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(16).astype(ml_dtypes.bfloat16) for _ in range(2)]
    with flags.override(xla_dump_to=str(tmp_path), xla_dump_hlo_snapshots=True):
        outputs = execute(BF16_MUL, args, backend)
    snapshots = sorted(tmp_path.glob("module_*.bf16_mul.snapshot.0.npz"))
    assert len(snapshots) == 1
    snap = load_snapshot(snapshots[0])
    assert all(_bits_equal(s, a) for s, a in zip(snap.arguments, args, strict=True))
    result = replay(snapshots[0], backend, print_result=False)
    assert result.bit_identical is True
    assert all(_bits_equal(r, o) for r, o in zip(result.outputs, outputs, strict=True))
    # and the values are right: the product in bf16, as NumPy computes it
    expected = (args[0].astype(np.float32) * args[1].astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert _bits_equal(result.outputs[0], expected)


@pytest.mark.parametrize("sharded_in", [False, True])
def test_a_sharded_jits_snapshot_holds_the_global_arrays_and_replays_on_its_devices(tmp_path, sharded_in):
    """A jit split over 4 devices writes the per-device module with the global arguments and
    results (NumPy or ShardedArray arguments alike); replay splits them again and gets the same
    bits, and the values are NumPy's."""
    import xla_teach
    import xla_teach.numpy as xnp
    from xla_teach.sharding import NamedSharding, P

    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((6, 2)).astype(np.float32)
    with flags.override(xla_force_host_platform_device_count=4, xla_dump_to=str(tmp_path),
                        xla_dump_hlo_snapshots=True):
        mesh = xla_teach.make_mesh((4,), ("b",))
        rows, whole = NamedSharding(mesh, P("b")), NamedSharding(mesh, P())
        f = xla_teach.jit(lambda x, w: (xnp.tanh(x @ w), (x @ w).sum()), in_shardings=(rows, whole))
        got = f(xla_teach.device_put(x, rows), w) if sharded_in else f(x, w)
    (snapshot,) = sorted(tmp_path.glob("module_*.snapshot.0.npz"))
    snap = load_snapshot(snapshot)
    assert [a.shape for a in snap.arguments] == [(8, 6), (6, 2)]
    assert parse_hlo(snap.module_text).device_count() == 4
    result = replay(snapshot, "cpu", print_result=False)
    assert result.bit_identical is True
    assert all(_bits_equal(r, np.asarray(g)) for r, g in zip(result.outputs, got, strict=True))
    bound = 8 * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(w))  # six-term dots, tanh's slope <= 1
    np.testing.assert_allclose(result.outputs[0], np.tanh(x @ w), atol=bound.max() + 2e-7)


def test_replay_prints_each_result_once_and_the_recorded_one_only_when_it_differs(tmp_path):
    import io

    constant = "HloModule c\nENTRY e {\n  ROOT k = s32[3] constant({0, 1, 2})\n}\n"
    snap = HloSnapshot(constant, [], [np.arange(3, dtype=np.int32)], "interpreter", {})
    path = snap.save(tmp_path / "o.npz")
    out = io.StringIO()
    replay(path, "interpreter", out=out)
    text = out.getvalue()
    assert "{0, 1, 2}" in text and "was " not in text and "bit-identical" in text
    HloSnapshot(constant, [], [np.array([0, 1, 5], np.int32)], "interpreter", {}).save(tmp_path / "p.npz")
    out = io.StringIO()
    replay(tmp_path / "p.npz", "interpreter", out=out)
    assert "was s32[3] {0, 1, 5}" in out.getvalue() and "DIFFERENT" in out.getvalue()
