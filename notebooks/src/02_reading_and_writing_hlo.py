# Source of notebooks/02_reading_and_writing_hlo.ipynb -- edit here, then run scripts/build_notebooks.py.

# %% [markdown]
# # 02 · Reading and writing HLO
#
# Every program XLA compiles reaches it as an **HLO module**: a graph of
# operations (*instructions*) on typed arrays, grouped into *computations*.
# JAX, TensorFlow and PyTorch/XLA never hand XLA Python code; they build HLO.
#
# HLO has three faces, and you will use all three:
#
# 1. **the builder** (`XlaBuilder`), the API front ends call, one op at a time;
# 2. **the text format**, what XLA prints in its dumps and what you type in tests;
# 3. **the in-memory IR** (`HloModule`, `HloComputation`, `HloInstruction`) that
#    passes rewrite.
#
# In this notebook you build a module, read its text line by line, write text
# yourself, see what the parser and the shape checker say when it is wrong, run
# a module on the reference interpreter, and open a dump written by real XLA.

# %%
import numpy as np

import xla_teach
from xla_teach import HloParseError, Shape, XlaBuilder, execute, parse_hlo

np.set_printoptions(precision=4, suppress=True)
print("xla_teach", xla_teach.__version__)

# %% [markdown]
# ## 1. Building HLO with `XlaBuilder`
#
# `axpy` computes `alpha * x + y` and also returns its sum. Each builder call adds
# one instruction and **infers its shape** from the operands, so a mistake is
# caught at the line that makes it. Python operators (`*`, `+`) call the same
# methods (`b.mul`, `b.add`). The scalar `alpha` times the vector `x` is an
# *implicit broadcast*: HLO itself only combines arrays of identical shape, so the
# builder inserts an explicit `broadcast` instruction for you.
#
# A `reduce` needs a small computation that combines two scalars (here `add`);
# `create_scalar_computation` makes one. It lives in the same module.

# %%
b = XlaBuilder("axpy")
alpha = b.parameter(0, Shape.scalar("f32"), "alpha")
x = b.parameter(1, Shape.array("f32", (4,)), "x")
y = b.parameter(2, Shape.array("f32", (4,)), "y")
axpy = alpha * x + y
total = b.reduce(axpy, b.constant(np.float32(0)), b.create_scalar_computation("add", "f32"), (0,))
module = b.build(b.tuple([axpy, total]))

print(module.to_text())

# %% [markdown]
# ## 2. Reading the text
#
# Take one line:
#
# ```
# %multiply = f32[4]{0} multiply(%broadcast, %x)
# ```
#
# | piece | meaning |
# |---|---|
# | `%multiply` | the instruction's name (unique in the module; `%` is the "long form") |
# | `f32[4]` | its shape: element type and dimensions (`f32[]` is a scalar) |
# | `{0}` | the **layout**: dimensions listed minor-to-major (`{1,0}` is row-major for a matrix) |
# | `multiply` | the opcode, spelled as XLA spells it (`exponential`, not `exp`) |
# | `(%broadcast, %x)` | operands: earlier instructions of the same computation |
# | `, dimensions={0}` | attributes, after the operands (see the `reduce` line) |
#
# The module holds computations. `ENTRY %main` is the one that runs; its
# parameters are the program's inputs and its `ROOT` instruction is the result.
# `%add_f32` is called by the `reduce` (`to_apply=%add_f32`): called computations
# are printed before their callers. The header's `entry_computation_layout` is the
# signature of the whole program.
#
# The same information is in the IR objects:

# %%
for instr in module.entry.instructions:
    operands = ", ".join(op.name for op in instr.operands)
    users = ", ".join(u.name for u in instr.users)
    print(f"{instr.name:<10} {instr.opcode:<10} {instr.shape.to_text():<22} operands=[{operands}]  users=[{users}]")

root = module.entry.root_instruction
print("\nROOT:", root)
print("called by reduce:", module.entry.instruction("reduce").to_apply.name)

# %% [markdown]
# In Jupyter, a module at the end of a cell is drawn as a graph (data flows down,
# edges carry shapes). Without Graphviz you see the text instead.

# %%
module

# %% [markdown]
# ## 3. Writing HLO as text
#
# Text is the quickest way to write a test case. You may use the *short form*:
# no `%`, no layouts (the default row-major layout is filled in). Called
# computations can come after their callers. `parse_hlo` returns an `HloModule`.

# %%
text = """
HloModule softplus_sum

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[2,3] parameter(0)
  e = f32[2,3] exponential(x)
  one = f32[] constant(1)
  ones = f32[2,3] broadcast(one), dimensions={}
  sp = f32[2,3] log(f32[2,3] add(e, ones))
  zero = f32[] constant(0)
  ROOT rows = f32[2] reduce(sp, zero), dimensions={1}, to_apply=add_f32
}
"""
try:
    softplus = parse_hlo(text)
except HloParseError as err:
    print("HloParseError:", err)

# %% [markdown]
# The parser refused: HLO has **no nested expressions**. Every value is a named
# instruction, so `log(add(e, ones))` must be written as two lines. Fixing it:

# %%
text = text.replace("  sp = f32[2,3] log(f32[2,3] add(e, ones))",
                    "  e1 = f32[2,3] add(e, ones)\n  sp = f32[2,3] log(e1)")
softplus = parse_hlo(text)
print(softplus)

# %% [markdown]
# **Round trip.** Printing a parsed module and parsing the print must give the same
# text again. This property is what lets XLA dumps be reloaded and replayed (and it
# is tested on every module in xla_teach's test suite).

# %%
printed = softplus.to_text()
again = parse_hlo(printed).to_text()
print("parse(print(m)) prints identically:", again == printed)
print("short form:\n")
print(softplus.to_text(long_form=False))

# %% [markdown]
# ## 4. When the text is wrong
#
# A parse error names the problem and points at it with a caret, like a compiler.
# `HloParseError` is a `ValueError`, so a tool can catch it and show one clear line.

# %%
broken_texts = {
    "typo in an opcode": "HloModule m\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] ad(p, p)\n}\n",
    "wrong operand count": "HloModule m\nENTRY main {\n  p = f32[4] parameter(0)\n"
                           "  ROOT e = f32[4] exponential(p, p)\n}\n",
    "undefined operand": "HloModule m\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(q)\n}\n",
}
for what, bad in broken_texts.items():
    try:
        parse_hlo(bad)
    except HloParseError as err:
        print(f"--- {what}\n{err}\n")

# %% [markdown]
# **Shape errors** are a different kind of mistake: the text is well formed but
# the operation is impossible. The builder checks shapes as you build
# (`ShapeError`); text that you type is checked by the **verifier**, which the
# pass pipeline also runs after every pass that changed the module.

# %%
from xla_teach.hlo.errors import ShapeError, VerificationError
from xla_teach.hlo.verifier import verify_module

b2 = XlaBuilder("mismatch")
p = b2.parameter(0, Shape.array("f32", (3,)), "p")
q = b2.parameter(1, Shape.array("f32", (4,)), "q")
try:
    b2.add(p, q)
except ShapeError as err:
    print("builder:", err)

declared_wrong = parse_hlo("""
HloModule m
ENTRY main {
  p = f32[4] parameter(0)
  q = f32[3] parameter(1)
  ROOT a = f32[4] add(p, q)
}
""")
try:
    verify_module(declared_wrong)
except VerificationError as err:
    print("verifier:", err)

# %% [markdown]
# ## 5. Running HLO on the interpreter
#
# `xla_teach.execute(module, args, backend)` compiles and runs a module. Here we
# ask for `backend="interpreter"`: a direct, slow, obviously-correct
# implementation of every opcode. It is the **oracle** the compiled CPU and GPU
# backends are tested against. Arguments are NumPy arrays in parameter order;
# the result is the list of the ROOT's leaves (a tuple root gives several).

# %%
args = [np.float32(2.0), np.arange(4, dtype=np.float32), np.ones(4, np.float32)]
result_axpy, result_total = execute(module, args, backend="interpreter")
print("axpy :", result_axpy, " numpy:", args[0] * args[1] + args[2])
print("total:", result_total, " numpy:", (args[0] * args[1] + args[2]).sum())

xs = np.array([[0.0, 1.0, -1.0], [2.0, -3.0, 0.5]], np.float32)
(rows,) = execute(softplus, [xs], backend="interpreter")
print("softplus row sums:", rows, " numpy:", np.log1p(np.exp(xs)).sum(axis=1))
assert np.allclose(rows, np.log1p(np.exp(xs)).sum(axis=1), rtol=1e-6)

# %% [markdown]
# The CPU backend (the default when `backend` is left out) compiles the same
# module to machine code; same answer:

# %%
print(execute(softplus, [xs], backend="cpu"))

# %% [markdown]
# ## 6. A dump written by real XLA
#
# `XLA_FLAGS=--xla_dump_to=DIR` makes XLA (under JAX, TensorFlow...) write the HLO
# it compiles. xla_teach parses those files as they are, including the metadata and
# stack-frame tables JAX adds. If this repository's sample dumps are present, we load
# the seed example `jnp.sum(x + y * z)` on three `f32[1024]`, before and after XLA's
# optimizations, and run it on the recorded inputs.

# %%
import json
from collections import Counter
from pathlib import Path

import xla_teach

# XLA's own dump of the seed example, kept in the repository (tests/data/xla_samples)
SAMPLE = Path(xla_teach.__file__).resolve().parents[1] / "tests" / "data" / "xla_samples" / "seed_reduce_sum"
if not (SAMPLE / "before_optimizations.txt").exists():
    print("XLA's sample dump comes with a clone of the repository (tests/data/xla_samples), not with the "
          "installed package: skipping the real-XLA part.")
else:
    before = parse_hlo((SAMPLE / "before_optimizations.txt").read_text())
    after = parse_hlo((SAMPLE / "after_optimizations.txt").read_text())
    print(before.entry.to_text(print_metadata=False))
    print("\nopcodes before XLA's passes:", dict(Counter(i.opcode for i in before.entry.instructions)))
    print("opcodes after  XLA's passes:", dict(Counter(i.opcode for i in after.entry.instructions)))
    print("fusion kinds after:", [i.fusion_kind for i in after.entry.instructions if i.opcode == "fusion"])

    inputs = np.load(SAMPLE / "inputs.npz")
    expected = np.load(SAMPLE / "outputs.npz")["out0"]
    tolerance = json.loads((SAMPLE / "meta.json").read_text())["tolerance"]
    sample_args = [inputs[f"arg{i}"] for i in range(len(inputs.files))]
    for label, m in (("before", before), ("after", after)):
        (got,) = execute(m, sample_args, backend="interpreter")
        ok = np.allclose(got, expected, rtol=tolerance["rtol"], atol=tolerance["atol"])
        print(f"interpreter on XLA's '{label}' module: {got:.5f} (XLA computed {expected:.5f}) ->",
              "match" if ok else "MISMATCH")

# %% [markdown]
# XLA's optimized module splits the 1024-element sum into a `reduce-window` of 32
# partial sums and a final `reduce` (a *tree reduction*, for accuracy and
# parallelism), and wraps each in a `kLoop` fusion. Notebook 03 follows xla_teach's
# own pipeline through rewrites like these, one pass at a time.

# %% [markdown]
# ## Graded exercise: `shape_inference`
#
# This chapter prepares this exercise (docs/exercises.md). The cell copies the
# starter file into `~/xla_teach_exercises/` -- never over a copy you already edited -- and grades it
# with the hidden checks, in a fenced-in process of its own. The task is in the starter's
# docstring: fill in its `TODO`s, then run the cell again. The untouched starter scores 0.

# %%
from xla_teach.exercises import grade, start

for exercise in ['shape_inference']:
    mine = start(exercise)  # your copy, in ~/xla_teach_exercises/: made once, never overwritten
    report = grade(exercise, mine)
    print(mine, "->", report.feedback[0].split(": ")[-1])  # print(report): every check, and why it failed

# %% [markdown]
# ## Exercises
#
# 1. **Builder.** Build `relu(x @ w + b)` for `x: f32[8,16]`, `w: f32[16,4]`, `b: f32[4]`
#    with `XlaBuilder` (`b.dot`, `b.add(..., broadcast_dimensions=(1,))`, `b.max` with
#    `0.0`). Print it, and check it against NumPy with `execute`.
# 2. **Text.** Write the same module as HLO text by hand (short form). Parse it, run
#    it on the same inputs, and confirm both modules give identical results. Then
#    change one declared shape to a wrong one and read what `verify_module` says.
# 3. **Reading a dump.** Print `after.computations` for the real XLA dump above and
#    explain, for each computation, who calls it and why it exists. Which instruction
#    of `before` became `%multiply_add_fusion`?
