# Source of notebooks/07_dumps_and_bug_reproduction.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 07 · Dumping with `XLA_FLAGS`, and reproducing a bug
#
# When a compiled program gives a wrong answer, crashes, or is slow, the first thing
# every XLA developer asks for is **a dump**:
#
# ```
# XLA_FLAGS="--xla_dump_to=/tmp/dump --xla_dump_hlo_pass_re=.* --xla_dump_hlo_snapshots" python train.py
# ```
#
# The dump holds the module before and after optimization, between passes, its buffer
# assignment, the generated code, and (with snapshots) the exact arguments of every
# run. From a dump you can **replay** the computation without the original program,
# compare a backend against the reference interpreter (**run-hlo-module**), and
# **bisect** the compiler to find the pass that broke it and a minimal reproducer.
#
# xla_teach reads the same flags and writes the same file names as XLA, and ships
# the same tools under one command, `xla-teach`. Everything below writes into a fresh
# temporary folder.

# %%
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from xla_teach import execute, flags, parse_hlo

WORK = Path(tempfile.mkdtemp(prefix="xla_teach_07_"))
print("working in", WORK)

HLO = """
HloModule jit_loss

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  logits = f32[64] parameter(0)
  labels = f32[64] parameter(1)
  p = f32[64] logistic(logits)
  one = f32[] constant(1)
  ones = f32[64] broadcast(one), dimensions={}
  q = f32[64] subtract(ones, p)
  error = f32[64] multiply(q, labels)
  zero = f32[] constant(0)
  ROOT loss = f32[] reduce(error, zero), dimensions={0}, to_apply=add_f32
}
"""
module = parse_hlo(HLO)
rng = np.random.default_rng(0)
args = [rng.standard_normal(64, dtype=np.float32), (rng.random(64) < 0.5).astype(np.float32)]

# %% [markdown]
# The module we will dump, replay and break, as a graph (data flows down): a logistic, `1 - p`,
# a product with the labels and a sum.

# %%
module

# %% [markdown]
# ## 1. Dumping
#
# In Python, `flags.override(...)` sets flags for a `with` block; the `XLA_FLAGS`
# environment variable works too (section 3). Each `--xla_*` flag keeps its XLA name.

# %%
DUMP = WORK / "dump"
with flags.override(xla_dump_to=str(DUMP), xla_dump_hlo_pass_re=".*", xla_dump_hlo_snapshots=True):
    (loss,) = execute(module, args, backend="cpu")
print("loss =", loss)
print()
for path in sorted(DUMP.iterdir()):
    print(f"{path.stat().st_size:8d}  {path.name}")

# %% [markdown]
# The names follow XLA's `dump.cc`: `module_<id>.<module name>.<what>`.
#
# | file | contents |
# |---|---|
# | `before_optimizations.txt` | the module as the compiler received it |
# | `NNNN.<pipeline>.after_<pass>.before_<next pass>.txt` | the module between two passes (`--xla_dump_hlo_pass_re`; with `.*`, after every pass that changed it) |
# | `cpu_after_optimizations.txt` | the optimized module the backend compiled |
# | `cpu_after_optimizations-buffer-assignment.txt` | where every value lives (notebook 06) |
# | `ir-no-opt.ll`, `ir-with-opt.ll`, `.s` | LLVM IR before and after LLVM's optimizations, and the assembly (notebook 05) |
# | `debug_options` | the flags that differ from their defaults |
# | `snapshot.0.npz` | the module **and the arguments and results** of run 0 (`--xla_dump_hlo_snapshots`) |
# | `explorer.html` | xla_teach's own: the compile explorer of the module (one offline page) |
#
# xla_teach also writes `index.html` into the folder: every module with its files, and what the
# names mean. Open it, or the explorer straight away, in a browser.
#
# Every file is plain text except the snapshot, and the HLO dumps parse back:

# %%
def dump_file(suffix):
    """The one file of the dump whose name ends with `suffix`."""
    (path,) = [p for p in DUMP.iterdir() if p.name.endswith(suffix)]
    return path


print(dump_file("debug_options").read_text())
optimized = parse_hlo(dump_file("cpu_after_optimizations.txt").read_text())
print(optimized.entry.to_text())
print()
print("\n".join(dump_file("ir-no-opt.ll").read_text().splitlines()[:12]), "\n...")

# %% [markdown]
# The dump's `explorer.html` is one offline page: here it is, as a browser shows it from the
# folder. (It opens without a network, so it can travel with a bug report.)

# %%
from xla_teach.tools.explorer import ExplorerPage

explorer_file = dump_file("explorer.html")
ExplorerPage(explorer_file, explorer_file.read_text())

# %% [markdown]
# A snapshot is a NumPy `.npz` file: the HLO text, a JSON description, and one array
# per argument and result. `load_snapshot` reads it back.

# %%
from xla_teach.tools.bugs.snapshot import load_snapshot

snapshot_path = dump_file("snapshot.0.npz")
snapshot = load_snapshot(snapshot_path)
print("module:", snapshot.module_name, "  recorded on:", snapshot.backend)
print("arguments:", [f"{a.dtype}{list(a.shape)}" for a in snapshot.arguments])
print("outputs:", snapshot.outputs)
print("entries:", np.load(snapshot_path).files)

# %% [markdown]
# ## 2. The tools, from the command line
#
# `xla-teach replay`, `run-hlo-module` and `bisect` mirror XLA's `replay_computation`,
# `run_hlo_module` and `hlo_bisect`, with XLA's option names. In a terminal you type
# `xla-teach ...`; here a small helper runs the same command with this notebook's
# Python, inside the dump folder.

# %%
def xla_teach_cli(*arguments, xla_flags=None, cwd=DUMP):
    """Run `xla-teach ARGUMENTS...` (as `python -m xla_teach.tools.cli`) and show what it prints;
    returns nothing, so that a cell ending with a call shows the output once."""
    env = dict(os.environ)
    shown = "xla-teach " + " ".join(shlex.quote(str(a)) for a in arguments)
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
        shown = f"XLA_FLAGS={shlex.quote(xla_flags)} {shown}"
    print("$", shown)
    done = subprocess.run([sys.executable, "-m", "xla_teach.tools.cli", *map(str, arguments)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    print(done.stdout + done.stderr, end="")
    print(f"[exit code {done.returncode}]\n")


snapshot_name = snapshot_path.name
xla_teach_cli("replay", snapshot_name, "--num_runs=3")

# %% [markdown]
# `replay` recompiled the module from the snapshot and ran it on the recorded
# arguments: **bit-identical** results mean the execution is reproducible without the
# original program, which is exactly what a bug report needs.
#
# `run-hlo-module` runs the module on a platform *and* on the reference interpreter
# and compares every output:

# %%
xla_teach_cli("run-hlo-module", snapshot_name)

# %% [markdown]
# ## 3. `XLA_FLAGS` in any process
#
# Flags also come from the environment, so any program (a training script, a test,
# the tools themselves) can be dumped without changing its code. Here the replay
# writes its own dump, with Graphviz graphs too:

# %%
SECOND = WORK / "dump_of_replay"
xla_teach_cli("replay", snapshot_name, xla_flags=f"--xla_dump_to={SECOND} --xla_dump_hlo_as_dot")
print("\n".join(sorted(p.name for p in SECOND.iterdir())))

# %% [markdown]
# ## 4. Reproducing a miscompile
#
# To practise on a real bug, xla_teach ships deliberately broken passes; the tools
# plant one with `--inject-bug=NAME` after the pass named by `--inject-after` (a test
# hook, never on by default). `broken-swap-operands` swaps the operands of `subtract`
# and `divide`, a mistake a "canonicalize operand order" pass could easily make.
# Pretend you do not know that, and start where a user would: the results are wrong.

# %%
xla_teach_cli("run-hlo-module", snapshot_name, "--inject-bug=broken-swap-operands", "--inject-after=call-inliner")

# %% [markdown]
# The CPU disagrees with the interpreter. Which pass is to blame? `bisect` compiles
# once, recording the module after every pass; every recorded stage is still an HLO
# module, so the interpreter can run it. A binary search finds the first stage whose
# results differ from the unoptimized module's, and the pass that produced it. Then it
# **shrinks** the module while the failure persists, and writes the reproducer.

# %%
xla_teach_cli("bisect", snapshot_name, "--inject-bug=broken-swap-operands", "--inject-after=call-inliner",
              "--dump_path=reproducer")
print("\n".join(sorted(p.name for p in (DUMP / "reproducer").iterdir())))

# %% [markdown]
# The reproducer is a handful of instructions, and its snapshot carries arguments on
# which it fails. It is what you attach to a bug report, or turn into a regression test:

# %%
print((DUMP / "reproducer" / "reproducer.hlo").read_text())
xla_teach_cli("run-hlo-module", "reproducer/reproducer.snapshot.npz", "--inject-bug=broken-swap-operands",
              "--inject-after=call-inliner")

# %% [markdown]
# ## 5. The same tools from Python, on a pass of your own
#
# Here is a pass a student might write: it moves constants to the right-hand side of
# binary operations (`op(c, x) -> op(x, c)`), which makes later pattern matching
# simpler. It has a bug.

# %%
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.passes.pass_base import HloPass


def is_constant_like(instr: HloInstruction) -> bool:
    return instr.opcode == "constant" or (instr.opcode == "broadcast" and instr.operand(0).opcode == "constant")


class CanonicalizeConstantsRight(HloPass):
    """op(constant, x) -> op(x, constant) for commutative binary ops."""

    name = "canonicalize-constants-right"
    commutative = ("add", "multiply", "maximum", "minimum", "subtract")

    def run(self, module: HloModule) -> bool:
        changed = False
        for instr in module.instructions():
            if instr.opcode in self.commutative and instr.operand_count == 2:
                lhs, rhs = instr.operands
                if is_constant_like(lhs) and not is_constant_like(rhs):
                    instr.replace_operand_with(0, rhs)
                    instr.replace_operand_with(1, lhs)
                    self.note(f"{instr.name}: moved {lhs.name} to the right")
                    changed = True
        return changed


# %% [markdown]
# `run_hlo_module` takes the pipeline to test; `backend_pipeline("cpu")` is a fresh copy
# of the CPU's passes and `inject_pass` inserts ours after a named pass.

# %%
from xla_teach.tools.bugs.bisect import bisect_compilation, inject_pass
from xla_teach.tools.cli.run_hlo_module import run_hlo_module
from xla_teach.tools.tool_support import backend_pipeline


def pipeline_with(new_pass):
    """A maker of fresh CPU pipelines with `new_pass` right after the call inliner (it runs once)."""
    return lambda: inject_pass(backend_pipeline("cpu"), new_pass, after="call-inliner")


report = run_hlo_module(module, "cpu", "interpreter", args=args,
                        test_pipeline=pipeline_with(CanonicalizeConstantsRight())())
print(report.text())

# %%
bisect_report = bisect_compilation(module, args, "cpu", pipeline_with(CanonicalizeConstantsRight()),
                                   abs_error=1e-3, rel_error=1e-3)
print(bisect_report.text())

# %% [markdown]
# The diff shows it: `subtract(ones, p)` became `subtract(p, ones)`. `subtract` is not
# commutative. The fix is one word:

# %%
class FixedCanonicalizeConstantsRight(CanonicalizeConstantsRight):
    commutative = ("add", "multiply", "maximum", "minimum")


fixed = bisect_compilation(module, args, "cpu", pipeline_with(FixedCanonicalizeConstantsRight()))
print(fixed.text())
print(run_hlo_module(module, "cpu", "interpreter", iterations=5,
                     test_pipeline=pipeline_with(FixedCanonicalizeConstantsRight())()).text())

# %% [markdown]
# `iterations=5` ran the fixed pipeline on five sets of random inputs, not only the
# snapshot's, before we believe the fix.

# %% [markdown]
# ## What did XLA do to my program?
#
# The same tools read XLA's own dumps. With
# `XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_pass_re=.*"`, JAX's XLA writes the module after every
# pass that changed it, numbered in the order they ran. `xla-teach explore DIR` turns them into a
# page that steps through **XLA's passes** with the same diffs and pictures as xla_teach's, each
# step naming xla_teach's pass of the same name (or saying there is none). The repository keeps
# such a dump of `jnp.tanh(x @ w).sum()` (`tests/data/xla_pass_dump/`); with JAX installed, the
# cell below makes a fresh one of the same program instead.

# %%
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from xla_teach.tools.explorer.page import explorer_page
from xla_teach.tools.explorer.xla_dump import modules_with_pass_dumps, passes_xla_teach_lacks, xla_dump_data

import xla_teach

xla_dir = Path(xla_teach.__file__).resolve().parents[1] / "tests" / "data" / "xla_pass_dump"  # in the checkout
try:
    import jax  # noqa: F401 - only to know whether JAX is here

    fresh = Path(tempfile.mkdtemp(prefix="xla_dump_"))
    program = ("import jax, jax.numpy as jnp, numpy as np\n"
               "print(jax.jit(lambda x, w: jnp.tanh(x @ w).sum())(np.ones((8, 4), np.float32), "
               "np.ones((4, 3), np.float32)))")
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={fresh} --xla_dump_hlo_pass_re=.*"}
    subprocess.run([sys.executable, "-c", program], env=env, check=True, capture_output=True)
    xla_dir = fresh
except ImportError:
    pass
(prefix,) = modules_with_pass_dumps(xla_dir)[:1]
steps = xla_dump_data(xla_dir, prefix)
for step in steps.passes:
    print(f"{step['pipeline'] + '/' + step['name']:<64} {'changed' if step['changed'] else '       '}  {step['notes'][-1]}")
print("\nXLA ran, and xla_teach has no pass named:", ", ".join(passes_xla_teach_lacks(xla_dir)))

# %%
page = Path(tempfile.mkdtemp(prefix="xla_passes_")) / f"{prefix}.xla.explorer.html"
page.write_text(explorer_page(steps))
ExplorerPage(page, page.read_text())  # pick "fusion" on the left: XLA's fusion, before and after

# %% [markdown]
# ## Graded exercise: `bisect`
#
# This chapter prepares this exercise (docs/exercises.md). The cell copies the
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['bisect']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Graded exercise: `read_dump`
#
# This chapter prepares this exercise (docs/exercises.md). The cell copies the
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['read_dump']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Read a dump.** Dump the module with `xla_dump_hlo_pass_re="fusion"` only. Which
#    files appear now, and why are there two per matching pass? Then try
#    `xla_dump_hlo_module_re` with a name that does not match.
# 2. **Bugs that hide.** Change `error` to `multiply(q, subtract(ones, labels))` and rerun
#    `run-hlo-module` with `broken-swap-operands` planted: it now passes. Why do the two
#    swapped subtractions cancel? Then plant `broken-multiply-to-add` into the seed module
#    `reduce_sum(x + y*z)` and find arguments on which it still gives the right answer
#    (which numbers satisfy `a*b == a+b`?). What do both tell you about testing a compiler
#    on one module and one input, and how does `--iterations` help?
# 3. **Your own bug hunt.** Write a pass that rewrites `divide(x, c)` into
#    `multiply(x, 1/c)` for every constant `c`. Use `run_hlo_module` with
#    `iterations=20` on modules dividing by 3, by 4 and by 0. Which ones miscompare, and
#    why does `algsimp` only do this rewrite for powers of two?
