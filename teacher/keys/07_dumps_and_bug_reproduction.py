# Answer key for notebook 07 (Dumps and bug reproduction) -- for teachers; not in the student
# kit. Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 07 · Dumps and bug reproduction -- answer key
#
# **Goals.** Students dump a compilation the way XLA does, replay a module from its snapshot,
# find the pass that breaks it (bisect), and learn why one module on one input proves little.
#
# **Time.** 1 hour in class, 1.5 hours of exercises (plus `bisect`, `read_dump`). **Where
# students stall:** telling dump files apart (the name says module, stage and pass), and
# tolerances: a miscompare must be larger than rounding.

# %%
import re
import tempfile
from pathlib import Path

import numpy as np

from xla_teach import flags, parse_hlo
from xla_teach.api import compile_module
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import add_constant, broadcast_scalar
from xla_teach.tools.bugs.bisect import inject_pass
from xla_teach.tools.cli.run_hlo_module import run_hlo_module
from xla_teach.tools.tool_support import backend_pipeline, compile_on

SOURCE = (Path(__file__).resolve().parents[2] / "notebooks" / "src" / "07_dumps_and_bug_reproduction.py").read_text()
HLO = re.search(r'HLO = """(.*?)"""', SOURCE, re.S).group(1)


def with_bug(bug, after="call-inliner"):
    return inject_pass(backend_pipeline("cpu"), bug, after=after)


# %% [markdown]
# ## Exercise 1: read a dump
#
# With `xla_dump_hlo_pass_re="fusion"` the per-pass files appear only around passes whose name
# matches (`fusion`, `multi_output_fusion`, `row-fusion`, `attention-fusion`: the pattern is a
# search, not a full match). There are two per matching pass because XLA dumps the module
# *before* and *after* it: each file is the module between two consecutive passes
# (`NNNN.<pipeline>.after_<pass>.before_<next>.txt`), so `...after_pipeline-start.before_fusion`
# is fusion's input and `...after_fusion.before_multi_output_fusion` its output (which is also
# the next matching pass's input, so neighbours share a file). With `xla_dump_hlo_module_re`
# set to a name that does not match, nothing is dumped for the module.

# %%
with tempfile.TemporaryDirectory() as folder:
    with flags.override(xla_dump_to=folder, xla_dump_hlo_pass_re="fusion"):
        compile_module(HLO, "cpu")
    names = sorted(p.name for p in Path(folder).iterdir())
per_pass = [n for n in names if ".after_" in n]
print(per_pass)
sides = [n.split(".after_")[1].removesuffix(".txt").split(".before_") for n in per_pass]
assert per_pass and all("fusion" in after or "fusion" in before for after, before in sides)
assert sum(before == "fusion" for _, before in sides) == 1 and sum(after == "fusion" for after, _ in sides) == 1
with tempfile.TemporaryDirectory() as folder:
    with flags.override(xla_dump_to=folder, xla_dump_hlo_module_re="no_such_module"):
        compile_module(HLO, "cpu")
    assert not list(Path(folder).iterdir())

# %% [markdown]
# ## Exercise 2: bugs that hide
#
# `broken-swap-operands` turns `1 - p` into `p - 1` and `1 - labels` into `labels - 1`: each
# is the negation of the right value, and the product of two negations is the right
# product, so the planted bug changes nothing that the output can show. `broken-multiply-to-add`
# turns `y * z` into `y + z`, which agrees exactly when `y * z == y + z`, that is
# `(y - 1)(z - 1) = 1` -- for instance `y = z = 2`, or `y = z = 0`. Both say the same: one
# module on one input can miss a wrong compiler; `--iterations N` runs N sets of random inputs,
# and the tests add many modules.

# %%
module = parse_hlo(HLO.replace("  error = f32[64] multiply(q, labels)",
                               "  labels_complement = f32[64] subtract(ones, labels)\n"
                               "  error = f32[64] multiply(q, labels_complement)"))
rng = np.random.default_rng(0)
args = [rng.standard_normal(64).astype(np.float32), (rng.random(64) < 0.5).astype(np.float32)]
hidden = run_hlo_module(module, "cpu", "interpreter", args=args, test_pipeline=with_bug("broken-swap-operands"))
print(hidden.text())
assert hidden.ok

SEED = """
HloModule seed
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = f32[4] parameter(2)
  m = f32[4] multiply(y, z)
  a = f32[4] add(x, m)
  zero = f32[] constant(0)
  ROOT sum = f32[] reduce(a, zero), dimensions={0}, to_apply=add_f32
}
"""
lucky = [np.float32([1, 2, 3, 4]), np.float32([2, 0, 3, 1.5]), np.float32([2, 0, 1.5, 3])]  # (y-1)(z-1) = 1
assert run_hlo_module(parse_hlo(SEED), "cpu", "interpreter", args=lucky,
                      test_pipeline=with_bug("broken-multiply-to-add")).ok
caught = run_hlo_module(parse_hlo(SEED), "cpu", "interpreter", iterations=3,
                        test_pipeline=with_bug("broken-multiply-to-add"))
print(caught.text())
assert caught.miscompared == 3

# %% [markdown]
# ## Exercise 3: your own bug hunt
#
# `x / 3` and `x * (1/3)` differ in the last bit for many x (1/3 is rounded, then the
# product is rounded again: two roundings instead of one), so the rewrite changes results by
# an ulp; `run_hlo_module`'s default bounds (1e-3) accept that, a bit-exact comparison does
# not. `x / 4` and `x * 0.25` are equal for every x: 0.25 is exact and multiplying by a
# power of two only changes the exponent. `x / 0` gives inf (or NaN for x = 0), and so does
# `x * inf` except at x = 0, where `0 * inf` is NaN but `0 / 0` is NaN too -- equal in
# value, but the rewrite is only safe by luck. That is why `algsimp` rewrites division into
# multiplication only by powers of two: exactly when the two agree for every input.

# %%
class DivideToMultiply(HloPass):
    name = "divide-to-multiply"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:
            for instr in list(comp.instructions):
                c = instr.operands[1] if instr.opcode == "divide" else None
                if c is not None and c.opcode == "broadcast" and c.operand(0).opcode == "constant":
                    value = float(c.operand(0).literal)
                    reciprocal = add_constant(comp, 1 / value if value else np.inf, c.shape.element_type)
                    wide = broadcast_scalar(comp, reciprocal, c.shape.dimensions)
                    comp.replace_instruction(instr, HloInstruction("multiply", instr.shape, [instr.operand(0), wide]))
                    changed = True
        return changed


def dividing_by(c: float) -> HloModule:
    return parse_hlo(f"""
HloModule divide
ENTRY main {{
  x = f32[256] parameter(0)
  c = f32[] constant({c})
  cs = f32[256] broadcast(c), dimensions={{}}
  ROOT y = f32[256] divide(x, cs)
}}""")


x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
for c in (3.0, 4.0):
    plain = with_bug(DivideToMultiply(), after="")
    (got,) = compile_on(dividing_by(c), "cpu", plain).execute([x])
    exact = bool(np.array_equal(got, x / np.float32(c)))
    print(f"x / {c}: bit-exact after the rewrite: {exact}")
    assert exact == (c == 4.0)
assert run_hlo_module(dividing_by(3.0), "cpu", "interpreter", iterations=20,
                      test_pipeline=with_bug(DivideToMultiply(), after="")).ok  # within 1e-3
assert run_hlo_module(dividing_by(0.0), "cpu", "interpreter", iterations=5,
                      test_pipeline=with_bug(DivideToMultiply(), after="")).ok  # inf and NaN where x / 0 has them
opcodes = {c: {i.opcode for i in compile_module(dividing_by(c), "cpu").module.instructions()} for c in (3.0, 4.0)}
print("xla_teach's own pipeline:", opcodes)
assert "divide" in opcodes[3.0] and "divide" not in opcodes[4.0]  # algsimp: only powers of two
