# Answer key for notebook 03 (The pass pipeline, stage by stage) -- for teachers; not in the
# student kit. Run it: every answer is computed and checked with an assert on this checkout.

# %% [markdown]
# # 03 · The pass pipeline -- answer key
#
# **Goals.** Students read a pipeline's record (what ran, what changed, why), switch passes
# off with XLA's flags, and write and insert a pass of their own that keeps the contract:
# rewrite in place, return whether anything changed.
#
# **Time.** 1 hour in class, 1.5 hours of exercises (plus `dce`, `cse`, `algsimp_rule`).
# **Where students stall:** iterating over `comp.instructions` while replacing (iterate over
# a copy: `list(comp.instructions)`), and forgetting that `replace_instruction` also removes
# what became unused.

# %%
import re
from pathlib import Path

import numpy as np

from xla_teach import execute, flags, parse_hlo
from xla_teach.api import compile_module
from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass, PassMisreportedChange
from xla_teach.passes.rewrite_utils import uniform_constant_value
from xla_teach.tools.tool_support import compile_on

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "src" / "03_pass_pipeline.py"
HLO = re.search(r'HLO = """(.*?)"""', NOTEBOOK.read_text(), re.S).group(1)  # the notebook's module
module = parse_hlo(HLO)
rng = np.random.default_rng(0)
args = [rng.standard_normal(1024, dtype=np.float32) for _ in range(2)]
(reference,) = execute(module, args, backend="interpreter")

# %% [markdown]
# ## Exercise 1: flags
#
# With `algsimp` disabled no other pass removes `x * 1`: `constant_folding` still folds
# `2 * 3` into `6`, `cse` still merges `e2` into `e1`, `dce` still removes the `tanh`, but the
# multiply by `ones` survives into the fused computation (fusion hides it; it costs one
# multiply per element). With `xla_teach_hlo_opt_level=0` only the passes that are needed
# for correctness run (expanders and rewriters that code generation relies on, the dot
# strategy, the memory scheduler): none of the simplifications, and no fusion.

# %%
with flags.override(xla_disable_hlo_passes="algsimp"):
    no_algsimp = compile_module(module, "cpu")
changed = [r.pass_name for r in no_algsimp.recorder.records if r.changed]
print("changed the module:", changed)
text = no_algsimp.module.to_text(print_metadata=False)
assert "constant_folding" in changed and "cse" in changed and "dce" in changed
assert re.search(r"multiply\(%param_\d+\.\d+, %ones", text), "x * 1 should survive without algsimp"
with flags.override(xla_teach_hlo_opt_level=0):
    level0 = compile_module(module, "cpu")
ran = [r.pass_name for r in level0.recorder.records if not r.skipped]
print("at opt level 0 these ran:", ran)
assert "fusion" not in ran and "algsimp" not in ran and "hlo-memory-scheduler" in ran

# %% [markdown]
# ## Exercise 2: a pass of your own
#
# `x * broadcast(2)` becomes `add(x, x)`: exact for floats (both round the same exact value
# once). The fixed point still terminates because the rewrite only removes multiplies. A pass
# that turned `add(x, x)` back into `multiply(x, 2)` in the same fixed point would undo it on
# every iteration: the pipeline would never reach a fixed point (xla_teach, like XLA, stops
# after 25 iterations and warns).

# %%
class MultiplyByTwoToAdd(HloPass):
    name = "multiply-by-two-to-add"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:
            for instr in list(comp.instructions):
                if instr.opcode != "multiply":
                    continue
                x, two = instr.operands
                if uniform_constant_value(two) != 2:
                    x, two = two, x
                if uniform_constant_value(two) != 2:
                    continue
                comp.replace_instruction(instr, HloInstruction("add", instr.shape, [x, x]))
                changed = True
        return changed


DOUBLE = """
HloModule double
ENTRY main {
  x = f32[1024] parameter(0)
  two = f32[] constant(2)
  twos = f32[1024] broadcast(two), dimensions={}
  ROOT y = f32[1024] multiply(x, twos)
}
"""
pipeline = cpu_pipeline()
pipeline.find("simplification").insert_before("algsimp", MultiplyByTwoToAdd())
doubled = compile_on(parse_hlo(DOUBLE), "cpu", pipeline)
assert any(r.pass_name == "multiply-by-two-to-add" and r.changed for r in doubled.recorder.records)
(got,) = doubled.execute([args[0]])
np.testing.assert_array_equal(got, args[0] * 2)  # exact
print("add(x, x) == 2 * x exactly on 1024 random floats")

# %% [markdown]
# ## Exercise 3: catch a liar
#
# A pass that changes the module but returns `False` is caught by the pipeline's check of a
# pass from outside xla_teach: it compares the module text before and after the pass with the
# pass's answer and raises `PassMisreportedChange`. XLA needs the truth because fixed-point
# pipelines stop when every pass says "no change": a pass that lies can stop the loop early
# (missed optimizations) or keep it spinning; dumps and the explorer also show only the
# passes that said they changed something.

# %%
class Liar(MultiplyByTwoToAdd):
    name = "liar"

    def run(self, module: HloModule) -> bool:
        super().run(module)
        return False


lying = cpu_pipeline()
lying.find("simplification").insert_before("algsimp", Liar())
try:
    compile_on(parse_hlo(DOUBLE), "cpu", lying)
    raise AssertionError("the liar was not caught")
except PassMisreportedChange as err:
    print("PassMisreportedChange:", err)
