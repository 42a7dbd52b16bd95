"""The compare page's data (tools/explorer/compare.py): instructions mapped across two compiles of
one training step -- checked against what the fusion passes themselves recorded they fused -- and
the page written by ``compiled.explore(compare=other)``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.tools.test_explorer import mlp_compiled
from xla_teach import flags
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.tools.explorer.compare import instruction_mapping
from xla_teach.tools.explorer.pass_view import final_names
from xla_teach.tools.explorer.structural_diff import structural_diff


@pytest.fixture(scope="module")
def fused_and_unfused():  # type: ignore[no-untyped-def]
    """The same MLP step compiled with fusion (A) and without any fusion pass (B)."""
    fused = mlp_compiled()
    with flags.override(xla_disable_hlo_passes="fusion,multi_output_fusion,row-fusion"):
        unfused = mlp_compiled()
    return fused, unfused


def test_an_unfused_instruction_maps_to_the_fusion_that_holds_it_on_the_other_side(fused_and_unfused) -> None:  # type: ignore[no-untyped-def]
    """Oracle: A's own pass records. Where A's fusion passes recorded fusing an instruction that B
    still has unfused (same name: one module compiled twice), B's instruction maps to the fusion
    that holds it in A's optimized module, and that fusion maps back to it."""
    fused, unfused = fused_and_unfused
    a, b = fused.executable.module, unfused.executable.module
    diffs = [structural_diff(parse_hlo(r.before), parse_hlo(r.after)) for r in fused.pass_records()
             if r.changed and not r.skipped and "fusion" in r.pass_name]
    holder = final_names(diffs, {i.name for c in a.computations for i in c.instructions})
    map_a, map_b = instruction_mapping(a, b)
    checked = 0
    for instr in b.entry.instructions:
        fusion = holder.get(instr.name)
        if fusion is None or instr.opcode in ("constant", "parameter") or not instr.metadata:
            continue
        assert fusion in map_b[instr.name], (instr.name, fusion, map_b[instr.name])
        assert instr.name in map_a[fusion], (fusion, instr.name)
        checked += 1
    assert checked >= 10, "the MLP's fusions hold at least ten instructions that B left unfused"
    # What neither side fused keeps its name and maps to itself first; every instruction has a
    # counterpart (the same program on both sides).
    for name in set(map_a) & set(map_b):
        if map_a[name] and name in map_a[name]:
            assert map_a[name][0] == name
    assert all(map_a.values()) and all(map_b.values())


def test_parameters_map_by_number_and_a_different_program_maps_nothing_it_does_not_share(fused_and_unfused) -> None:  # type: ignore[no-untyped-def]
    fused, _ = fused_and_unfused
    other = parse_hlo("""HloModule other

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%p), metadata={op_name="jit(other)/neg" source_file="other.py" source_line=3}
}
""")
    map_a, map_b = instruction_mapping(fused.executable.module, other)
    params = [i.name for i in fused.executable.module.entry.instructions if i.opcode == "parameter" and i.parameter_number == 0]
    assert map_b["p"] == params and map_b["n"] == []


def test_compiled_explore_compare_writes_one_offline_page_of_both(fused_and_unfused, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fused, unfused = fused_and_unfused
    page = fused.explore(str(tmp_path / "cmp.html"), profile_runs=2, compare=unfused)
    text = page.path.read_text()
    assert not re.search(r"(src|href)=\"https?:", text), "no network request"
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1)
                      .replace("<\\/", "</"))
    assert data["a"]["sizes"]["fusions"] > 0 and data["b"]["sizes"]["fusions"] == 0
    assert data["a"]["sizes"]["kernels"] < data["b"]["sizes"]["kernels"]
    assert data["a"]["profile"]["runs"] == 2 and data["b"]["profile"]["median_us"] > 0
    differ = {p["name"] for p in data["passes"] if p["a"] == "*" and p["b"] != "*"}
    assert "fusion/fusion" in differ
    with pytest.raises(FileExistsError):
        fused.explore(str(page.path), compare=unfused)
