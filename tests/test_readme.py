"""README.md's section "model_fn at two stages" shows real output.

The section holds a Python block and the two HLO texts it prints; the block is run
as ``model_fn.py`` (the file name appears in the metadata) and what it prints must
be exactly the two texts, so the README cannot drift from the compiler.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## model_fn at two stages"


def test_model_fn_section_matches_what_the_code_prints(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    assert SECTION in readme
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", section, re.S | re.M)
    assert [lang for lang, _ in blocks] == ["python", "", ""], "expected the code, then the two stages"
    (tmp_path / "model_fn.py").write_text(blocks[0][1])
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "model_fn.py"], cwd=tmp_path, capture_output=True, text=True,
                          check=False, env=env)
    assert done.returncode == 0, done.stderr
    printed = [text.strip("\n") for text in done.stdout.split("\n\n\nHloModule")]
    printed[1] = "HloModule" + printed[1]
    shown = [text.strip("\n") for _, text in blocks[1:]]
    assert shown[0] == printed[0], "README stage 'hlo' differs from what the code prints"
    assert shown[1] == printed[1], "README stage 'optimized_hlo' differs from what the code prints"
    assert "kind=kInput" in shown[1] and shown[0].count(" reduce(") == 1
