"""``scripts/gpu_check.sh`` on a machine without a GPU: its environment step passes and every step
that needs a device says so in the summary instead of failing (on a GPU machine the script itself
is the test)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from xla_teach.backends.gpu.runtime import device_available

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(device_available(), reason="a CUDA device is present: run the script itself")
def test_gpu_check_without_a_device_skips_the_device_steps(tmp_path: Path) -> None:
    out = tmp_path / "logs"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(out), "env", "tests", "bench"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = (out / "summary.txt").read_text()
    lines = {line.split()[0]: line for line in summary.splitlines()[1:]}
    assert "PASS" in lines["env"]
    assert "SKIP (no CUDA device)" in lines["tests"] and "SKIP (no CUDA device)" in lines["bench"]
    assert "device_available: False" in (out / "env.log").read_text()


def test_gpu_check_needs_an_output_folder() -> None:
    result = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0 and "usage: scripts/gpu_check.sh OUTDIR" in result.stderr
