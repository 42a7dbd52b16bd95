"""What runs in the student's process: the student's code on the grader's inputs, results as data.

The autograder keeps its checks, their expected answers and its judging in its own process
(see :mod:`sandbox`). The child process that loads a submission only answers *tasks*: "run
your pass on this module and send back the module text", "should this producer fuse into that
consumer?", "compute softplus of these numbers". Each task is a function here, taking the
loaded solution and plain data (HLO text, names, arrays) and returning plain data; whatever
the student's code does to this process -- patching the grader's functions, say -- cannot
reach the verdict, which the parent reaches from the data alone.

A task may raise :class:`~xla_teach.exercises.grading.CaseFailed` with feedback (a pass whose
``run()`` does not return a bool, IR that does not verify): the case then scores zero.
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from xla_teach.exercises.grading import CaseFailed
from xla_teach.exercises.hlo_checks import check_verifies, run_student_pass
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.parser import parse_hlo
from xla_teach.passes.pass_base import HloPass, HloPassPipeline

SOFTPLUS = "emit_softplus"
I64 = ir.IntType(64)
PTR = ir.PointerType()
_IR_TYPES = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}


def _module_text(module: HloModule) -> str:
    return module.to_text()


# ---- dce, cse: a pass ------------------------------------------------------------------------------------
def run_pass(solution: ModuleType, entry: str, text: str) -> dict[str, Any]:
    """A fresh instance of the student's pass class, run on ``text``."""
    _, module, changed = run_student_pass(getattr(solution, entry), text)
    check_verifies(module, text)
    return {"changed": changed, "text": _module_text(module)}


# ---- algsimp_rule: one rule of the simplifier -------------------------------------------------------------
def checked_rule(rewrite: Callable[[HloInstruction], object]) -> Callable[[HloInstruction], HloInstruction | None]:
    """The student's rule, with its result checked before the simplifier uses it."""

    def apply(instr: HloInstruction) -> HloInstruction | None:
        result = rewrite(instr)
        if result is None:
            return None
        if not isinstance(result, HloInstruction):
            raise CaseFailed(f"rewrite({instr.name}) must return an HloInstruction or None, "
                             f"but returned {result!r}")
        if result.parent is not instr.parent:
            raise CaseFailed(f"rewrite({instr.name}) returned {result.name}, which is not in the same computation: "
                             "add new instructions with instr.parent.add_instruction(...) (or the rewrite_utils "
                             "helpers) before returning them")
        if not result.shape.compatible(instr.shape):
            raise CaseFailed(f"rewrite({instr.name}) returned {result.name} of shape {result.shape}, but "
                             f"{instr.name} has shape {instr.shape}: a replacement must have the same shape")
        return result

    return apply


def simplify(solution: ModuleType, entry: str, text: str) -> dict[str, Any]:
    """An ``AlgebraicSimplifier`` whose only rule is the student's, run on ``text``."""
    from xla_teach.passes.simplifiers.algebraic_simplifier import AlgebraicSimplifier
    from xla_teach.passes.simplifiers.algsimp_rules_base import Rule

    module = parse_hlo(text)
    rule = Rule("student rewrite", ("*elementwise",), checked_rule(getattr(solution, entry)))
    AlgebraicSimplifier(rules=(rule,)).run(module)
    check_verifies(module, text)
    return {"text": _module_text(module)}


# ---- fusion_decision: one decision -------------------------------------------------------------------------
def ask(should_fuse: Callable[..., object], producer: HloInstruction, consumer: HloInstruction) -> bool:
    answer = should_fuse(producer, consumer)
    if not isinstance(answer, bool | np.bool_):
        raise CaseFailed(f"should_fuse({producer.name}, {consumer.name}) must return True or False, "
                         f"but returned {answer!r}")
    return bool(answer)


@functools.lru_cache(maxsize=4)
def _parsed(text: str) -> HloModule:
    return parse_hlo(text)


def decide(solution: ModuleType, entry: str, text: str, producer: str, consumer: str) -> dict[str, Any]:
    """``should_fuse(producer, consumer)`` on the instructions of those names in ``text``'s ENTRY;
    ``edited`` says whether the call changed the module (it must only look)."""
    module = _parsed(text)
    by_name = {i.name: i for i in module.entry.instructions}
    before = module.to_text()
    fuse = ask(getattr(solution, entry), by_name[producer], by_name[consumer])
    edited = module.to_text() != before
    if edited:
        _parsed.cache_clear()
    return {"fuse": fuse, "edited": edited}


# ---- elemental_emitter: a JIT-compiled map kernel around the student's scalar emitter -----------------------
def build_map_kernel(emit: Callable[[ir.IRBuilder, ir.Value], object], dtype: np.dtype) -> str:
    """The IR text of ``void kernel(ptr out, ptr in, i64 n)``: ``out[i] = emit(in[i])``."""
    fty = _IR_TYPES[dtype]
    module = ir.Module(name="softplus_kernel")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name="kernel")
    out, inp, n = fn.args
    entry, header, body, done = (fn.append_basic_block(s) for s in ("entry", "header", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name="i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    x = b.load(b.gep(inp, [i], inbounds=True, source_etype=fty), typ=fty, name="x")
    y = emit(b, x)
    if not isinstance(y, ir.Value):
        raise CaseFailed(f"{SOFTPLUS} must return the llvmlite value it built, but returned {y!r}")
    if y.type != fty:
        raise CaseFailed(f"{SOFTPLUS} returned a {y.type} for a {fty} input: the result must have the "
                         "input's type (x.type)")
    b.store(y, b.gep(out, [i], inbounds=True, source_etype=fty))
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), b.block)
    b.branch(header)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


@functools.cache
def _initialize_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


def _check_calls(ir_text: str) -> None:
    """Refuse calls to functions that do not exist (MCJIT would abort the whole process)."""
    _initialize_llvm()
    try:
        parsed = llvm.parse_assembly(ir_text)
        parsed.verify()
    except RuntimeError as err:
        raise CaseFailed(f"the IR is not valid LLVM IR:\n  {str(err).strip()}\n{_numbered(ir_text)}") from None
    for fn in parsed.functions:
        if fn.is_declaration and not fn.name.startswith("llvm.") and not llvm.address_of_symbol(fn.name):
            raise CaseFailed(f"the IR calls `{fn.name}`, which does not exist here: use LLVM intrinsics "
                             "(llvm.fabs, llvm.maxnum...) or the emitters of xla_teach.backends.llvm.math")


def _numbered(text: str, limit: int = 60) -> str:
    lines = text.splitlines()
    shown = [f"  {k + 1:3d}  {line}" for k, line in enumerate(lines[:limit])]
    return "\n".join(shown + (["  ..."] if len(lines) > limit else []))


class ScalarKernel:
    """The student's emitter, compiled for ``dtype`` and callable on NumPy arrays."""

    def __init__(self, emit: Callable[[ir.IRBuilder, ir.Value], object], dtype: np.dtype) -> None:
        from xla_teach.backends.cpu.jit import CpuJit

        self.dtype = np.dtype(dtype)
        ir_text = build_map_kernel(emit, self.dtype)
        _check_calls(ir_text)
        self.jit = CpuJit(ir_text, opt_level=2, keep_assembly=False)
        address = self.jit.function_address("kernel")
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(address)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=self.dtype)
        out = np.empty_like(x)
        self._fn(out.ctypes.data, x.ctypes.data, x.size)
        return out


_KERNELS: weakref.WeakKeyDictionary[ModuleType, dict[str, ScalarKernel]] = weakref.WeakKeyDictionary()


def kernel_for(solution: ModuleType, dtype: type) -> ScalarKernel:
    """Compile once per loaded solution and dtype (every check reuses it)."""
    kernels = _KERNELS.setdefault(solution, {})
    key = np.dtype(dtype).str
    if key not in kernels:
        kernels[key] = ScalarKernel(getattr(solution, SOFTPLUS), np.dtype(dtype))
    return kernels[key]


# ---- the reference and the comparison ------------------------------------------------------------------

def evaluate(solution: ModuleType, entry: str, dtype: str, x: np.ndarray) -> dict[str, Any]:
    """The student's emitter compiled for ``dtype`` (once), applied to ``x``."""
    return {"y": kernel_for(solution, np.dtype(dtype))(x)}


# ---- bisect: a pipeline with a planted wrong pass ---------------------------------------------------------
class _RewriteOpcode(HloPass):
    """DELIBERATELY WRONG (a test hook): replaces every ``old`` by ``new`` with the same operands."""

    def __init__(self, name: str, old: str, new: str) -> None:
        super().__init__()
        self.name, self.old, self.new = name, old, new

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:
            for instr in list(comp.instructions):
                if instr.opcode == self.old:
                    wrong = HloInstruction(self.new, instr.shape, instr.operands, dict(instr.attrs))
                    comp.replace_instruction(instr, wrong)
                    changed = True
        return changed


class _SwapSubtract(HloPass):
    """DELIBERATELY WRONG (a test hook): ``a - b`` becomes ``b - a``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def run(self, module: HloModule) -> bool:
        changed = False
        for instr in list(module.instructions()):
            if instr.opcode == "subtract" and instr.operand(0) is not instr.operand(1):
                a, b = instr.operands
                instr.replace_operand_with(0, b)
                instr.replace_operand_with(1, a)
                changed = True
        return changed


def _broken_pass(kind: str, name: str) -> HloPass:
    if kind == "swap-subtract":
        return _SwapSubtract(name)
    if kind == "multiply-to-add":
        return _RewriteOpcode(name, "multiply", "add")
    return _RewriteOpcode(name, "maximum", "minimum")



def _insert_after(pipeline: HloPassPipeline, after: str, new_pass: HloPass) -> bool:
    for i, p in enumerate(pipeline.passes):
        if p.name == after:
            pipeline.passes.insert(i + 1, new_pass)
            return True
        if isinstance(p, HloPassPipeline) and _insert_after(p, after, new_pass):
            return True
    return False


def make_pipeline(case: tuple[str, str, str] | None) -> HloPassPipeline:
    """The CPU pipeline, with the case's broken pass planted."""
    from xla_teach.tools.tool_support import backend_pipeline

    pipeline = backend_pipeline("cpu")
    if case is not None:
        kind, name, after = case
        if not _insert_after(pipeline, after, _broken_pass(kind, name)):
            raise AssertionError(f"the CPU pipeline has no pass '{after}'")
    return pipeline



def find_broken_pass(solution: ModuleType, entry: str, text: str, args: list[np.ndarray],
                     planted: list[str] | None) -> dict[str, Any]:
    """The student's ``find_broken_pass`` on ``text``, the CPU pipeline with ``planted`` in it."""
    case = tuple(planted) if planted is not None else None
    answer = getattr(solution, entry)(parse_hlo(text), make_pipeline(case), [a.copy() for a in args])  # type: ignore[arg-type]
    if answer is not None and not isinstance(answer, str):
        raise CaseFailed(f"{entry} must return a pass name (a str) or None, but returned {answer!r}")
    return {"answer": answer}


TASKS: dict[str, Callable[..., dict[str, Any]]] = {
    "run_pass": run_pass, "simplify": simplify, "decide": decide, "evaluate": evaluate,
    "find_broken_pass": find_broken_pass,
}
