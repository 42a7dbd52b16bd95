"""Hidden checks of the ``capstone``: the student's own optimization pipeline on whole programs.

The earlier exercises each graded one piece on modules made for it. The capstone puts the
pieces together -- the student's dead code elimination, CSE, simplifier rule and fusion
decision, in the order the student chooses (``build_pipeline()``) -- and grades the result on
programs nobody wrote for it: small models traced from Python with xla_teach's front end
(dense layers, activations, softmax, layer norm, a loss), drawn from the seed, with what
ordinary code leaves in a traced module: values computed and never used, the same product
computed twice, constants written twice, multiplications by one. Every case checks that
the optimized program computes what the program did (the interpreter is the oracle) *and*
the property its check is about, so a pipeline that does nothing scores nothing:

* no instruction nothing reads is left (dead code elimination ran, late enough);
* no two instructions compute the same value (CSE ran, before fusion copied things apart);
* no multiplication by ones is left (the simplifier rule ran);
* as few kernels, computing as few instructions, as xla_teach's reference pipeline of the same
  passes leaves (fusion ran, in a good order: fused before CSE, an expensive value written twice
  is computed twice, inside two fusions);
* the optimized program, compiled by the CPU backend (its own DCE, CSE, simplifier and fusion
  switched off), runs and gives the interpreter's results.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.hlo_checks import check_same_results, fake_args, module_from_student, show
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.ir import HloModule
from xla_teach.hlo.opcodes import BUFFER_NAMING_OPCODES
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.rewrite_utils import uniform_constant_value

ENTRY_POINT = "build_pipeline"


# ---- the programs ----------------------------------------------------------------------------------------
def model_program(seed: int) -> str:
    """A small model traced with xla_teach's front end: 2-3 layers drawn from the seed, written
    the way people write them (a product computed twice, a value left unused, ``* 1.0``)."""
    import numpy as np

    import xla_teach.numpy as xnp
    from xla_teach import nn
    from xla_teach.frontend.jit import jit

    rng = random.Random(seed)
    batch, width = rng.choice([2, 3, 4]), rng.choice([4, 6, 8])
    layers = rng.randint(2, 3)
    kinds = [rng.choice(["relu", "tanh", "gelu", "sigmoid", "layer_norm", "softmax"]) for _ in range(layers)]
    twice = rng.randrange(layers)  # the layer whose product is computed a second time
    unused = rng.randrange(layers)  # the layer that leaves a value nobody reads
    one = rng.randrange(layers)  # the layer that multiplies by 1.0

    def program(x, *params):  # type: ignore[no-untyped-def]
        h = x
        for k, kind in enumerate(kinds):
            w, b = params[2 * k], params[2 * k + 1]
            z = h @ w + b
            if k == unused:
                _ = xnp.exp(z) * 0.5  # a debugging leftover
            if kind == "layer_norm":
                mean = xnp.mean(z, axis=-1, keepdims=True)
                z = (z - mean) / xnp.sqrt(xnp.mean((z - mean) ** 2, axis=-1, keepdims=True) + 1e-5)
            elif kind == "softmax":
                z = nn.softmax(z, axis=-1)
            else:
                z = xnp.tanh(z) if kind == "tanh" else getattr(nn, kind)(z)
            if k == twice:  # the same product again, as a residual, and a gate's value written twice
                gate_sum = xnp.sum(xnp.exp(-z * z), axis=-1, keepdims=True)
                gate_max = xnp.max(xnp.exp(-z * z), axis=-1, keepdims=True)
                z = z + h @ w * 0.1 + (gate_sum - gate_max) * 0.1
            if k == one:
                z = z * 1.0
            h = z
        return xnp.mean(h * h)

    args = [np.zeros((batch, width), np.float32)]
    for _ in range(layers):
        args += [np.zeros((width, width), np.float32), np.zeros((width,), np.float32)]
    text = jit(program, backend="interpreter").lower(*args).as_text()
    return parse_hlo(text).to_text(print_metadata=False)


# ---- what the checks look at ---------------------------------------------------------------------------
def dead_instructions(module: HloModule) -> list[str]:
    entry = module.entry
    return [i.name for i in entry.instructions if not i.users and i is not entry.root
            and i.opcode != "parameter" and not i.has_side_effect()]


def duplicates(module: HloModule) -> list[tuple[str, str]]:
    """Pairs of ENTRY instructions that compute the same value (fusions and parameters aside)."""
    from xla_teach.passes.simplifiers.cse import cse_key

    seen: dict[object, str] = {}
    pairs = []
    for instr in module.entry.instructions:
        if instr.opcode in ("parameter", "fusion") or instr.has_side_effect():
            continue
        key = cse_key(instr)
        if key in seen:
            pairs.append((seen[key], instr.name))
        else:
            seen[key] = instr.name
    return pairs


def multiplications_by_one(module: HloModule) -> list[str]:
    """Multiplies (anywhere, fusions included) with an operand that is all ones."""
    found = []
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "multiply" and any(uniform_constant_value(op) == 1 for op in instr.operands):
                found.append(instr.name)
    return found


def kernels(module: HloModule) -> int:
    """The ENTRY's instructions that run as kernels (not those that only name a buffer: parameters,
    constants, tuples, bitcasts...)."""
    return sum(1 for i in module.entry.instructions if i.opcode not in BUFFER_NAMING_OPCODES)


def work(module: HloModule) -> int:
    """The instructions every run computes: the kernels, and what the fusions compute inside
    (an expensive value fused into two consumers is computed twice)."""
    fused = [i.fused_computation for i in module.entry.instructions if i.opcode == "fusion"]
    inside = sum(1 for comp in fused for i in comp.instructions if i.opcode not in BUFFER_NAMING_OPCODES)
    return kernels(module) + inside


def reference_counts(text: str) -> tuple[int, int]:
    """(kernels, work) that xla_teach's own passes of the same kinds leave: CSE, DCE, fusion (the
    exercise's rules: no output fusion), DCE."""
    from xla_teach.exercises.graders.fusion_decision import CONFIG
    from xla_teach.passes.fusion.instruction_fusion import InstructionFusion
    from xla_teach.passes.simplifiers.cse import CommonSubexpressionElimination
    from xla_teach.passes.simplifiers.dce import DeadCodeElimination

    module = parse_hlo(text)
    for p in (CommonSubexpressionElimination(), DeadCodeElimination(), InstructionFusion(CONFIG),
              DeadCodeElimination()):
        p.run(module)
    return kernels(module), work(module)


def _optimized(text: str, solution: StudentProcess) -> tuple[HloModule, HloModule, str, str]:
    """(original, the student's pipeline's result, its text, its passes' names in order), the
    results checked to be the same."""
    result = solution.call("run_pipeline", entry=ENTRY_POINT, text=text)
    result = result if isinstance(result, dict) else {}
    module = module_from_student(result.get("text"), text)
    original = parse_hlo(text)
    after = module.to_text(print_metadata=False)
    check_same_results(original, module, text, after_text=after)
    return original, module, after, ", ".join(map(str, result.get("passes", []))) or "?"


def _beyond_reference(module: HloModule, text: str) -> str:
    """Why ``module`` leaves more than the reference pipeline does on ``text`` ("" if it does not)."""
    (ref_kernels, ref_work), (mine, my_work) = reference_counts(text), (kernels(module), work(module))
    if mine <= ref_kernels and my_work <= ref_work:
        return ""
    return (f"your pipeline leaves {mine} kernels computing {my_work} instructions per run, where CSE, DCE and "
            f"fusion in a good order leave {ref_kernels} kernels computing {ref_work}")


# ---- cases -----------------------------------------------------------------------------------------------
def _nothing_left(text: str, solution: StudentProcess, find: Callable[[HloModule], list[str]], what: str) -> None:
    """After the student's pipeline the program computes the same, and ``find`` finds nothing;
    otherwise the case fails with ``what`` and the first few things found."""
    _, module, after, _ = _optimized(text, solution)
    left = find(module)
    if left:
        raise CaseFailed(f"{what}: {', '.join(left[:8])}\n" + show("program", text) + "\n"
                         + show("after your pipeline", after))


def _no_dead_code(text: str, solution: StudentProcess) -> None:
    _nothing_left(text, solution, dead_instructions, "instruction(s) nothing reads are still in the ENTRY")


def _no_duplicates(text: str, solution: StudentProcess) -> None:
    _nothing_left(text, solution, lambda m: [f"{a} = {b}" for a, b in duplicates(m)],
                  "instructions that compute the same value are still both there")


def _no_multiply_by_one(text: str, solution: StudentProcess) -> None:
    _nothing_left(text, solution, multiplications_by_one, "multiplications by ones are still there")


def _few_kernels(text: str, solution: StudentProcess) -> None:
    _, module, after, passes = _optimized(text, solution)
    excess = _beyond_reference(module, text)
    if excess:
        raise CaseFailed(f"{excess} (passes, in your order: {passes})\n" + show("program", text) + "\n"
                         + show("after your pipeline", after))


def _runs_compiled(text: str, solution: StudentProcess) -> None:
    import numpy as np

    from xla_teach import flags
    from xla_teach.api import compile_module
    from xla_teach.hlo.evaluator import evaluate_module

    original, module, after, _ = _optimized(text, solution)
    if _beyond_reference(module, text):
        raise CaseFailed("the pipeline leaves more kernels than the reference (see the check on kernels): the "
                         "compiled program is graded on an optimized module\n" + show("after your pipeline", after))
    args = fake_args(original, seed=7)
    want = evaluate_module(original, args)
    with flags.override(xla_disable_hlo_passes="algsimp,cse,dce,fusion"):
        got = compile_module(after, "cpu").execute(list(args))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not np.allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-4, atol=1e-5):
            raise CaseFailed(f"compiled by the CPU backend, output {i} is {np.asarray(g).ravel()[:4]}..., the "
                             f"interpreter gives {np.asarray(w).ravel()[:4]}...\n" + show("after your pipeline", after))


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed

    def cases(fn: Callable[[str, StudentProcess], None], seeds: range) -> list[Callable[[StudentProcess], None]]:
        return [partial(fn, model_program(base + s)) for s in seeds]

    return [
        Check("removes-dead-code", "leaves no instruction nothing reads, and computes the same",
              cases(_no_dead_code, range(0, 2))),
        Check("merges-duplicates", "leaves no two instructions that compute the same value",
              cases(_no_duplicates, range(2, 4))),
        Check("applies-your-rule", "leaves no multiplication by ones", cases(_no_multiply_by_one, range(4, 6))),
        Check("fuses-like-the-reference", "leaves no more kernels, and no more work in them, than CSE, DCE and "
              "fusion in a good order",
              cases(_few_kernels, range(6, 9))),
        Check("runs-compiled", "the optimized program compiles for the CPU and gives the interpreter's results",
              cases(_runs_compiled, range(9, 10))),
    ]


EXERCISE = Exercise(
    name="capstone",
    title="Your own optimization pipeline, graded on whole programs",
    teaches="How passes work together: your DCE, CSE, simplifier rule and fusion decision as one pipeline, "
            "in an order you choose (why CSE goes before fusion, why DCE runs again after it), graded on "
            "small models traced from Python that you have not seen, and compiled end to end.",
    entry_points=[(ENTRY_POINT, "function")],
    make_checks=make_checks,
)
