# Source of notebooks/03_pass_pipeline.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 03 · The pass pipeline, stage by stage
#
# An XLA compiler is mostly a list of **passes**. Each pass reads the HLO module,
# rewrites some of it, and says whether it changed anything. Simplification passes
# (algebraic simplifier, constant folding, CSE, DCE) run together until nothing
# changes any more (a *fixed point*); then fusion merges operations into kernels;
# then the backend prepares the module for code generation.
#
# xla_teach **records every pass run**: the module text before and after, the
# instruction and fusion counts, the time, and the pass's own notes on what it
# decided. In this notebook you will
#
# 1. look at the pipeline the CPU backend runs;
# 2. compile a module and read the record pass by pass, with before/after diffs and graphs;
# 3. switch passes off with XLA's flags;
# 4. write a pass of your own and insert it into the pipeline.

# %%
import difflib

import numpy as np

from xla_teach import execute, flags, parse_hlo
from xla_teach.api import compile_module
from xla_teach.backends.cpu.cpu_pipeline import cpu_pipeline

print(cpu_pipeline().describe())

# %% [markdown]
# Pipelines nest, as in XLA: `cpu-pipeline` holds `optimization` (whose
# `simplification` is a fixed point), the CPU's `tree_reduction_rewriter`, `fusion`,
# and `cpu-codegen-prepare` (which ends with the memory scheduler that decides the
# order the kernels run in).
#
# ## 1. A module with something for every pass
#
# This module was written to give the simplifiers work: a multiplication by one,
# a constant expression `2 * 3`, the same `exponential` computed twice, an unused
# `tanh`, and `scaled + (-y)`.

# %%
HLO = """
HloModule passes_demo

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  one = f32[] constant(1)
  ones = f32[1024] broadcast(one), dimensions={}
  x_times_one = f32[1024] multiply(x, ones)
  two = f32[] constant(2)
  three = f32[] constant(3)
  six = f32[] multiply(two, three)
  sixes = f32[1024] broadcast(six), dimensions={}
  scaled = f32[1024] multiply(x_times_one, sixes)
  e1 = f32[1024] exponential(y)
  e2 = f32[1024] exponential(y)
  e_sum = f32[1024] add(e1, e2)
  unused = f32[1024] tanh(x)
  neg_y = f32[1024] negate(y)
  diff = f32[1024] add(scaled, neg_y)
  total = f32[1024] add(diff, e_sum)
  zero = f32[] constant(0)
  ROOT sum = f32[] reduce(total, zero), dimensions={0}, to_apply=add_f32
}
"""
module = parse_hlo(HLO)
executable = compile_module(module, "cpu")
print(executable.recorder.table())

# %% [markdown]
# One line per pass run: its index, `*` if it changed the module, the pipeline and
# pass name, the instruction and fusion counts before → after, and the time. The
# `simplification` passes appear twice: the first round changed something, so the
# fixed point ran them again, and the second round changed nothing.
#
# ## 2. What each pass did, and why
#
# Each `PassRecord` keeps the module text before and after the pass, and the
# **notes** the pass wrote while deciding (`HloPass.note(...)`). A unified diff of
# the two texts shows the rewrite exactly.

# %%
def show_pass(recorder, pass_name, max_diff_lines=40):
    """Print the notes and the text diff of the first run of `pass_name` that changed the module."""
    record = next((r for r in recorder.records if r.pass_name == pass_name and r.changed), None)
    if record is None:
        print(f"{pass_name}: no run changed the module\n")
        return None
    print(f"=== #{record.index} {record.pipeline}/{record.pass_name}: "
          f"{record.instructions_before} -> {record.instructions_after} instructions")
    for note in record.notes:
        print("  note:", note)
    diff = difflib.unified_diff(record.before.splitlines(), record.after.splitlines(), "before", "after",
                                lineterm="", n=0)
    lines = [line for line in diff if not line.startswith("@@")]
    print("\n".join(lines[:max_diff_lines]))
    print()
    return record


for name in ("algsimp", "constant_folding", "cse", "dce"):
    show_pass(executable.recorder, name)

# %% [markdown]
# Read the notes: `algsimp` applied the rule `x * 1 -> x` (its rules are a table of
# labelled rewrites), `constant_folding` evaluated `2 * 3` with the interpreter,
# `cse` found that `e2` computes the same value as `e1`, and `dce` removed the
# `tanh` nobody reads (plus anything the other passes left unused).
#
# Fusion is the big one. Its notes list every producer it fused into a consumer and
# every candidate it refused, with the reason:

# %%
fusion_record = show_pass(executable.recorder, "fusion", max_diff_lines=60)

# %% [markdown]
# ### Before/after graphs
#
# The same stage as pictures (drawn with Graphviz, as XLA's `--xla_dump_hlo_as_dot`
# does). The fusion appears as a gray cluster holding the fused computation.

# %%
from IPython.display import HTML, display

try:
    from xla_teach.tools.render import have_dot, render_svg, svg_for_inline
except ImportError:  # an older checkout without the renderer
    have_dot = None

if have_dot is None or not have_dot():
    print("Graphviz's `dot` is not available: showing the text only (apt-get install graphviz).")
elif fusion_record is not None:
    before_svg = svg_for_inline(render_svg(fusion_record.before, title="before fusion"))
    after_svg = svg_for_inline(render_svg(fusion_record.after, title="after fusion"))
    display(HTML(f'<div style="display:flex;gap:1em;align-items:flex-start">'
                 f"<div>{before_svg}</div><div>{after_svg}</div></div>"))

# %% [markdown]
# In Jupyter a `PassRecord` displays itself as a small report (counts, notes,
# graphs before and after with new instructions outlined in red, and the diff),
# and the whole recorder as a step-through report with Prev/Next buttons.
# Try `executable.recorder` in a cell of its own.

# %%
fusion_record

# %% [markdown]
# ## 3. Switching passes off with flags
#
# XLA's `--xla_disable_hlo_passes=NAME,NAME` skips passes by name; the record
# still lists them, marked as skipped. In xla_teach the flags are set with
# `flags.override(...)` (for a `with` block), `flags.set(...)`, or the
# `XLA_FLAGS` environment variable, exactly as with XLA.

# %%
with flags.override(xla_disable_hlo_passes="cse,fusion"):
    no_cse_no_fusion = compile_module(module, "cpu")

for record in no_cse_no_fusion.recorder.records:
    if record.pass_name in ("cse", "fusion"):
        print(record.summary())
print()
print(no_cse_no_fusion.module.entry.to_text())

# %% [markdown]
# Without CSE the two `exponential`s stay; without fusion every instruction is its
# own kernel. The results must not change (passes only change *how* a value is
# computed), so we check all three against the interpreter:

# %%
rng = np.random.default_rng(0)
args = [rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)]
(reference,) = execute(module, args, backend="interpreter")  # the oracle, no passes
(optimized,) = executable.execute(args)
(unfused,) = no_cse_no_fusion.execute(args)
print(f"interpreter {reference:.4f}   cpu {optimized:.4f}   cpu without cse/fusion {unfused:.4f}")
assert np.allclose([optimized, unfused], reference, rtol=1e-4)

# %% [markdown]
# ## 4. Writing your own pass
#
# A pass is a class with a `name` and a `run(module) -> bool` that rewrites the
# module **in place** and returns whether it changed anything. The pipeline checks
# that claim for a pass you write (it compares the module text before and after;
# xla_teach's own passes are trusted, as XLA trusts its passes, and checked by the
# tests) and runs the verifier after every change, so a pass that breaks the
# module is caught at once.
#
# Ours rewrites `add(a, negate(b))` into `subtract(a, b)`: one operation instead
# of two. It is exact, because IEEE 754 defines `a - b` as `a + (-b)`. The
# simplifier does not have this rule (XLA's does, and it is listed in
# `algebraic_simplifier.py` as a good exercise).

# %%
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass, PassOptions, PassRecorder


class AddNegateToSubtract(HloPass):
    """add(a, negate(b)) -> subtract(a, b), and add(negate(b), a) -> subtract(a, b)."""

    name = "add-negate-to-subtract"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:
            for instr in list(comp.instructions):
                if instr.opcode != "add":
                    continue
                a, b = instr.operands
                if b.opcode != "negate":
                    a, b = b, a  # add is commutative
                if b.opcode != "negate":
                    continue
                subtract = HloInstruction("subtract", instr.shape, [a, b.operand(0)])
                subtract.copy_side_info_from(instr)  # keep metadata (op_name, source line)
                self.note(f"{comp.name}: {instr.name} = add({a.name}, negate({b.operand(0).name})) -> subtract")
                # As XLA's ReplaceInstruction: users of the add now read the subtract, and the add
                # goes, with the negate if nothing else reads it any more.
                comp.replace_instruction(instr, subtract)
                changed = True
        return changed


# Run it alone on a copy of the module first: a pass is just a function of a module.
# The `negate` went with the `add`: `replace_instruction` removes what became unused.
copy = module.clone()
print("changed:", AddNegateToSubtract().run(copy))
for instr in copy.entry.instructions:
    if instr.opcode in ("subtract", "negate"):
        print(" ", instr, " users:", [u.name for u in instr.users])

# %% [markdown]
# Now insert it into the CPU pipeline, inside the `simplification` fixed point just
# before `algsimp`, and compile with that pipeline. `compile_on` from the tools replaces the
# backend's HLO passes with the pipeline you give it; code generation is unchanged.

# %%
from xla_teach.tools.tool_support import compile_on

pipeline = cpu_pipeline()
pipeline.find("simplification").insert_before("algsimp", AddNegateToSubtract())
print(pipeline.find("simplification").describe())

custom = compile_on(module, "cpu", pipeline)
show_pass(custom.recorder, "add-negate-to-subtract")
print(custom.module.to_text(print_metadata=False))

(with_my_pass,) = custom.execute(args)
print(f"interpreter {reference:.4f}   cpu with add-negate-to-subtract {with_my_pass:.4f}")
assert np.allclose(with_my_pass, reference, rtol=1e-4)

# %% [markdown]
# The fused computation now computes `subtract(scaled, y)`: one instruction fewer in
# the kernel's inner loop.
#
# A pipeline can also be run by hand on any module, with a `PassRecorder` to keep
# the stages; this is what the compiler does inside `compile_module`:

# %%
recorder = PassRecorder()
by_hand = module.clone()
pipeline.run(by_hand, PassOptions(), recorder)
print(f"{len(recorder)} pass runs, {len(recorder.changed_records())} changed the module; "
      f"{by_hand.instruction_count()} instructions at the end")

# %% [markdown]
# ## Graded exercises: `dce`, `cse`, `algsimp_rule`
#
# This chapter prepares these exercises (docs/exercises.md). The cell copies each
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['dce', 'cse', 'algsimp_rule']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Flags.** Compile the module with `xla_disable_hlo_passes="algsimp"` only. Which
#    later pass does the work `algsimp` would have done, if any? Read the table and the
#    notes to find out. Then try `xla_teach_hlo_opt_level=0`: what runs at all?
# 2. **A pass of your own.** Write `MultiplyByTwoToAdd`, rewriting `multiply(x, broadcast(2))`
#    into `add(x, x)` (floats: exact). Insert it before `algsimp` and check, on random
#    inputs, that the interpreter gives the same results before and after. Does the fixed
#    point still terminate? Why would a pass that rewrites `add(x, x)` back into a multiply
#    in the same fixed point be a bug?
# 3. **Catch a liar.** Make a copy of `AddNegateToSubtract` whose `run` always returns
#    `False`, insert it, and compile. Read the error: which guard of `HloPassPipeline`
#    caught it, and why does XLA want passes to report changes truthfully?
