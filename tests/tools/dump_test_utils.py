"""Shared pieces of the dump/render/report tests: the seed example and a real XLA dump folder.

The seed example is ``jnp.sum(x + y * z)`` on three ``f32[1024]``; the sample folder
holds what real XLA (jaxlib 0.10.2, CPU) dumped for it with
``--xla_dump_hlo_as_text --xla_dump_hlo_as_dot --xla_dump_hlo_as_html --xla_dump_hlo_pass_re=.*``.
"""

from __future__ import annotations

import re
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "tests" / "data" / "xla_samples"
XLA_DUMP = SAMPLES / "xla_cpu_dump_of_seed_example"
SEED_HLO_FILE = XLA_DUMP / "module_0000.jit_f.before_optimizations.txt"

# The kinds of dump file names, as regular expressions over the part after "module_NNNN.jit_f.".
# Derived from XLA's dump.cc and checked against the real folder by test_dump_sample_kinds.
FILE_KINDS: dict[str, str] = {
    "before_optimizations": r"before_optimizations\.(txt|dot|html)",
    "after_optimizations": r"(cpu_|sm_\d+\.\d+_gpu_)?after_optimizations\.(txt|dot|html)",
    "after_optimizations_top_level": r"(cpu_)?after_optimizations\.top_level\.html",
    "buffer_assignment": r"(cpu_)?after_optimizations-buffer-assignment\.txt",
    "buffer_assignment_extra": r"cpu_after_optimizations-(buffer-assignment-values|live-range|memory-usage-report)\.txt",
    "per_pass": r"\d{4}\.[\w.\-]+\.after_[\w\-]+(\.before_[\w\-]+)?\.(txt|dot|html)",
    "llvm_ir": r"([\w\-]+\.)?ir-(no-opt|with-opt)\.ll",
    "object_file": r"obj-file\.[\w\-]+\.o",
    "debug_options": r"debug_options",
    "assembly": r"s",
    "ptx": r"ptx",
    "snapshot": r"snapshot\.\d+\.(pb|npz)",
    "explorer": r"explorer\.html",  # xla_teach's own: the compile explorer (XLA has none)
    "summary": r"summary\.json",  # xla_teach's own: what tells two modules of one name apart (the index's table)
}

MODULE_FILE = re.compile(r"^(?:\d+\.)?module_(\d{4,})\.jit_f\.(.+)$")


def kind_of(name: str) -> str | None:
    """The FILE_KINDS key of a dump file name, or None (e.g. JAX's module_XXXX.jit_f/ folder)."""
    match = MODULE_FILE.match(name)
    if not match:
        return None
    rest = match.group(2)
    for kind, pattern in FILE_KINDS.items():
        if re.fullmatch(pattern, rest):
            return kind
    return None


def seed_hlo() -> str:
    return SEED_HLO_FILE.read_text()
