"""Every HLO text file the real XLA dumped (tests/data/xla_samples) parses, verifies and prints back
byte for byte: the printer writes XLA's syntax, and the parser loses nothing it reads.

The program folders hold `before_optimizations.txt` / `after_optimizations.txt`; the full
`--xla_dump_to` folder of the seed example holds one text file per pass as well. New samples join
automatically.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.hlo.verifier import verify_module

SAMPLES = Path(__file__).parents[2] / "tests" / "data" / "xla_samples"


def _hlo_text_files() -> list[Path]:
    if not SAMPLES.is_dir():
        return []
    files = [p for p in SAMPLES.glob("*/*_optimizations.txt")]
    # The seed dump folder: module text per pass and before/after (not buffer-assignment reports).
    files += [p for p in SAMPLES.glob("xla_cpu_dump_of_seed_example/module_*.txt")
              if "buffer-assignment" not in p.name and "live-range" not in p.name
              and "memory-usage" not in p.name]
    return sorted(files)


FILES = _hlo_text_files()


def test_samples_were_found_when_present() -> None:
    if SAMPLES.is_dir():
        assert len(FILES) >= 16, FILES


@pytest.mark.skipif(not FILES, reason=f"no samples under {SAMPLES}")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_xla_dump_prints_back_identically(path: Path) -> None:
    original = path.read_text()
    module = parse_hlo(original)
    verify_module(module)
    printed = module.to_text()
    assert printed.rstrip("\n") == original.rstrip("\n")
    # And a second round trip is a fixed point.
    assert parse_hlo(printed).to_text() == printed
