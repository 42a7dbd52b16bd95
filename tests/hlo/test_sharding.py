"""Shardings as typed values (hlo/sharding.py): every form XLA prints parses and prints back as
written, tile assignments expand as XLA's iota form says, bad ones are parse errors with a caret,
the verifier checks that a sharding fits its value, and a per-device module runs on global arrays
(split and reassembled by the shardings) giving XLA's results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_teach.api import execute
from xla_teach.hlo.errors import VerificationError
from xla_teach.hlo.evaluator.devices import run_global
from xla_teach.hlo.sharding import HloSharding, ShardingError, parse_sharding
from xla_teach.hlo.text.parser import HloParseError, parse_hlo
from xla_teach.hlo.verifier import verify_module

DATA = Path(__file__).parents[1] / "data" / "spmd"
# XLA's SPMD programs (tests/data/spmd/generate.py): sums and a transpose on a 2x2 mesh, data parallelism,
# a matmul on the 2-D mesh, a softmax, a transpose by all-to-all, a gather from a split table, a prefix sum
SPMD_PROGRAMS = sorted(p.stem for p in DATA.glob("*.npz"))
# ... of which the shard_map program's module before partitioning is Shardy's manual computation
# (xla.sdy.GlobalToLocalShape ...): per-device code, which one device cannot run
AUTO_PROGRAMS = [n for n in SPMD_PROGRAMS if "xla.sdy.GlobalToLocalShape" not in (DATA / f"{n}.before.txt").read_text()]

FORMS = [
    "{replicated}", "{maximal device=3}", "{manual}", "{unknown}",
    "{devices=[2,4]<=[8]}", "{devices=[2,2]0,2,1,3}", "{devices=[4,2]<=[2,4]T(1,0)}",
    "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
    "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}", "{{replicated}, {devices=[4]<=[4]}}", "{}",
    '{devices=[2]0,1 metadata={op_name="jit(f)/x" source_file="f.py"}}',
]


@pytest.mark.parametrize("text", FORMS)
def test_every_form_prints_back_as_written(text: str) -> None:
    assert parse_sharding(text).to_text() == text


def test_a_module_with_shardings_prints_back_identically() -> None:
    text = ("HloModule m, num_partitions=4\n\nENTRY e {\n"
            "  x = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}\n"
            "  y = f32[8,4]{1,0} negate(x), sharding={devices=[2,2]<=[4]}\n"
            "  ROOT t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(x, y), sharding={{replicated}, {devices=[2,2]<=[4]}}\n}\n")
    module = parse_hlo(text)
    printed = module.to_text()
    for sharding in ("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}", "{devices=[2,2]<=[4]}",
                     "{{replicated}, {devices=[2,2]<=[4]}}"):
        assert f"sharding={sharding}" in printed
    assert parse_hlo(printed).to_text() == printed
    element = module.entry.root_instruction.sharding.elements[1]
    assert element.devices() == parse_sharding("{devices=[2,2]0,1,2,3}").devices() == (0, 1, 2, 3)


def test_tile_assignments_expand_as_xlas_iota_form_says() -> None:
    sharding = parse_sharding("{devices=[4,2]<=[2,4]T(1,0)}")
    np.testing.assert_array_equal(sharding.tile_assignment(), np.arange(8).reshape(2, 4).T.reshape(4, 2))
    assert sharding.tile_index(5) == (1, 1)
    replicated = parse_sharding("{devices=[2,1,4]<=[8] last_tile_dim_replicate}")
    assert replicated.data_tile_dims == (2, 1) and replicated.tile_index(6) == (1, 0)


@pytest.mark.parametrize("text,dims", [
    ("{devices=[2,3]<=[6]}", (5, 7)),  # uneven: the last tiles are padded
    ("{devices=[3,1,2]<=[2,3]T(1,0) last_tile_dim_replicate}", (6, 4)),
    ("{devices=[1,4]3,1,0,2}", (3, 8)),
])
def test_shards_put_back_together_give_the_global_array(text: str, dims: tuple[int, ...]) -> None:
    sharding = parse_sharding(text)
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    devices = range(int(np.prod(sharding.tile_dims)))
    pieces = {d: sharding.shard(x, d) for d in devices}
    assert {p.shape for p in pieces.values()} == {sharding.tile_shape(dims)}
    np.testing.assert_array_equal(sharding.assemble(pieces, dims), x)
    tile = sharding.tile_shape(dims)
    for d in devices:  # each piece is the slice its tile index names, zero-padded
        index = sharding.tile_index(d)
        want = np.zeros(tile, np.float32)
        part = x[tuple(slice(i * t, (i + 1) * t) for i, t in zip(index, tile, strict=True))]
        want[tuple(slice(0, n) for n in part.shape)] = part
        np.testing.assert_array_equal(pieces[d], want)


def test_maximal_and_replicated_pieces() -> None:
    x = np.arange(4.0)
    maximal = parse_sharding("{maximal device=1}")
    assert np.array_equal(maximal.shard(x, 1), x) and not maximal.shard(x, 0).any()
    assert np.array_equal(HloSharding.replicate().shard(x, 3), x)


@pytest.mark.parametrize("value,message", [
    ("{devices=[2,2]0,1,2}", "3 devices listed for 4 tiles"),
    ("{devices=[2]<=[3]}", "iota [3] has 3 devices"),
    ("{devices=[2,2]<=[4]T(0,0)}", "not a permutation"),
    ("{replicate}", "expected replicated, maximal, manual, unknown or devices="),
    ("{devices=[2]0,1 sideways}", "expected last_tile_dim_replicate"),
])
def test_a_bad_sharding_is_a_parse_error_at_its_place(value: str, message: str) -> None:
    text = f"HloModule m\n\nENTRY e {{\n  ROOT x = f32[4]{{0}} parameter(0), sharding={value}\n}}\n"
    with pytest.raises(HloParseError) as err:
        parse_hlo(text)
    assert message in str(err.value) and "line 4" in str(err.value) and "^" in str(err.value)


def test_the_verifier_checks_that_a_sharding_fits_its_value() -> None:
    module = parse_hlo("HloModule m\n\nENTRY e {\n  ROOT x = f32[4,4]{1,0} parameter(0), sharding={devices=[4]<=[4]}\n}\n")
    with pytest.raises(VerificationError, match="splits 1 dimension"):
        verify_module(module)


def _xla_data(name: str) -> tuple[list[np.ndarray], list[np.ndarray], list[HloSharding]]:
    data = np.load(DATA / f"{name}.npz")
    args = [data[f"global_arg{i}"] for i in range(len([k for k in data.files if k.startswith("global_arg")]))]
    n = len([k for k in data.files if k.startswith("global_out")])
    return args, [data[f"global_out{i}"] for i in range(n)], [parse_sharding(str(data[f"out_sharding{i}"]))
                                                             for i in range(n)]


@pytest.mark.parametrize("name", SPMD_PROGRAMS)
def test_xlas_per_device_modules_run_on_global_arrays(name: str) -> None:
    """XLA's optimized SPMD module for 4 devices, given the global inputs: its parameters'
    shardings split them, and the outputs put back by XLA's output shardings are XLA's."""
    args, want, out_shardings = _xla_data(name)
    got = run_global(parse_hlo((DATA / f"{name}.txt").read_text()), args, out_shardings)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_execute_takes_global_arrays_and_says_when_an_output_needs_its_sharding() -> None:
    args, want, _ = _xla_data("data_parallel")
    (got,) = execute((DATA / "data_parallel.txt").read_text(), args, backend="interpreter")  # a replicated scalar
    np.testing.assert_allclose(got, want[0], rtol=1e-5)
    args, _, _ = _xla_data("sums_2x2")
    with pytest.raises(ShardingError, match="pass out_shardings"):
        execute((DATA / "sums_2x2.txt").read_text(), args, backend="interpreter")
    with pytest.raises(ValueError, match="the gpu backend runs one"):
        execute((DATA / "sums_2x2.txt").read_text(), args, backend="gpu")


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("name", AUTO_PROGRAMS)
def test_jaxs_module_before_partitioning_computes_the_global_result_on_one_device(name: str, backend: str) -> None:
    """What JAX writes before XLA partitions it (``Sharding`` and ``xla.sdy.*`` custom calls,
    shardings on parameters and results) runs on one device and gives XLA's global outputs."""
    args, want, _ = _xla_data(name)
    got = execute((DATA / f"{name}.before.txt").read_text(), args, backend=backend)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_shardys_shardings_read_as_xlas() -> None:
    """JAX writes a shard_map's boundary in Shardy's dialect: the mesh in the module's
    frontend attributes, a sharding per value as the mesh axes of each dimension."""
    from xla_teach.hlo.sharding import parse_sdy_mesh, parse_sdy_shardings

    mesh = parse_sdy_mesh('{xla.sdy.meshes={mesh = #sdy.mesh<["x"=2, "y"=2]>}}')
    assert mesh is not None and mesh[1] == ("x", "y")
    both, rows, whole = parse_sdy_shardings(
        '#sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{"y"}, {}]>, <@mesh, [{}, {}]>]>', mesh)
    assert both.devices() == parse_sharding("{devices=[2,2]<=[4]}").devices() and both.tile_dims == (2, 2)
    reference = parse_sharding("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert rows.tile_dims == reference.tile_dims and rows.devices() == reference.devices()
    assert whole.is_replicated


def _with_header(text: str, devices: int = 4) -> str:
    """The module as ``--xla_dump_to`` writes it: ``num_partitions`` in the header (JAX's
    ``lowered.as_text()``, which the test data holds, leaves it out)."""
    first, rest = text.split("\n", 1)
    return first.replace(", frontend_attributes", f", num_partitions={devices}, frontend_attributes", 1) + "\n" + rest


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("name", SPMD_PROGRAMS)
def test_jaxs_dumped_module_is_partitioned_for_its_devices_and_gives_xlas_results(name: str, backend: str) -> None:
    """JAX's module before partitioning, with the num_partitions its dump writes: compiling it runs
    the SPMD partitioner first (a recorded stage), the devices run the per-device program on their
    pieces of the global arguments, and the results are XLA's (shard_map's programs too, whose
    bodies hold collectives by mesh axis)."""
    args, want, _ = _xla_data(name)
    text = _with_header((DATA / f"{name}.before.txt").read_text())
    got = execute(text, args, backend=backend)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_real_jax_dump_of_a_sharded_program_runs_and_records_its_partitioning() -> None:
    """The file exactly as ``XLA_FLAGS=--xla_dump_to`` wrote it for a sharded jax.jit on 4 CPU
    devices: it runs on global arrays and gives JAX's output; its compile records the
    spmd-partitioning stage (changed), where XLA's own per-device module records it unchanged."""
    from xla_teach.api import compile_module

    data = np.load(DATA / "jax_dump" / "io.npz")
    text = (DATA / "jax_dump" / "module_0000.jit__lambda.before_optimizations.txt").read_text()
    assert "num_partitions=4" in text.split("\n", 1)[0]
    for backend in ("interpreter", "cpu"):
        (got,) = execute(text, [data["x"], data["w"]], backend=backend)
        np.testing.assert_allclose(got, data["out"], rtol=1e-5, atol=1e-6)
    records = {r.pipeline: r for r in compile_module(text, "cpu").recorder.records}
    assert records["spmd-partitioning"].changed
    per_device = compile_module((DATA / "data_parallel.txt").read_text(), "cpu").recorder.records
    stage = [r for r in per_device if r.pipeline == "spmd-partitioning"]
    assert [r.pass_name for r in stage] == ["call-inliner", "spmd-partitioning"] and not any(r.changed for r in stage)


def test_the_partitioning_stage_is_in_the_dumps_and_the_explorer(tmp_path: Path) -> None:
    """JAX's sharded dump compiled with every pass dumped: the spmd-partitioning stage has its
    files (the module before and after it, as XLA names them), and the compile explorer's pass
    list shows it, changed, with its structural diff."""
    from xla_teach import flags
    from xla_teach.api import compile_module
    from xla_teach.tools.explorer.model import build_data

    text = (DATA / "jax_dump" / "module_0000.jit__lambda.before_optimizations.txt").read_text()
    with flags.override(xla_dump_to=str(tmp_path), xla_dump_hlo_pass_re=".*"):
        executable = compile_module(text, "cpu")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert any("after_spmd-partitioning" in n and "spmd-partitioning" in n for n in names), names
    data = build_data(executable, graphs=False)
    (entry,) = [p for p in data.passes if p["name"] == "spmd-partitioning" and p.get("pipeline") == "spmd-partitioning"]
    assert entry["changed"] and entry["diff"]
