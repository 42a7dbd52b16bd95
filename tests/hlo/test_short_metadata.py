"""``short_metadata``: printed HLO keeps op_name and the source line, and the source file's name
without its folder (a notebook's is /tmp/ipykernel_NNN/NNN.py); the full form is unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import xla_teach
from xla_teach.hlo.text.parser import parse_hlo

TEXT = """HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x), metadata={op_type="neg" op_name="jit(f)/neg" source_file="/tmp/ipykernel_77/123.py" source_line=5}
}
"""


def test_short_metadata_keeps_the_file_name_and_line_only() -> None:
    module = parse_hlo(TEXT)
    full = module.to_text()
    short = module.to_text(short_metadata=True)
    assert 'source_file="/tmp/ipykernel_77/123.py"' in full and 'op_type="neg"' in full
    assert 'metadata={op_name="jit(f)/neg" source_file="123.py" source_line=5}' in short
    assert parse_hlo(short).entry.root.metadata.get("source_line") == 5


def test_lowered_and_compiled_take_print_options() -> None:
    fn = xla_teach.jit(lambda x: -x)
    lowered = fn.lower(np.ones(4, np.float32))
    assert "metadata=" not in lowered.as_text("hlo", print_metadata=False)
    assert "/" not in lowered.as_text("hlo", short_metadata=True).split("source_file=")[1].split('"')[1]
    compiled = lowered.compile()
    assert "metadata=" not in compiled.as_text("optimized_hlo", print_metadata=False)
    with pytest.raises(ValueError, match="apply to the HLO stages"):
        compiled.as_text("llvm_ir", print_metadata=False)
