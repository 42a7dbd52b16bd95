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
from collections.abc import Callable
from types import ModuleType
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from xla_teach.exercises.grading import CaseFailed
from xla_teach.exercises.hlo_checks import check_verifies, run_student_pass
from xla_teach.hlo.ir import HloInstruction, HloModule
from xla_teach.hlo.text.parser import parse_hlo
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


def emit_map_kernel(solution: ModuleType, entry: str, dtype: str) -> dict[str, Any]:
    """The IR text of the map kernel around the student's emitter, for ``dtype``: what the grader
    compiles and runs in its runner (``run_map_kernel``), a process the student's code never saw."""
    ir_text = build_map_kernel(getattr(solution, entry), np.dtype(dtype))
    _check_calls(ir_text)
    return {"ir": ir_text}


_COMPILED: dict[str, tuple[Any, Any]] = {}  # IR text -> (its JIT, the kernel's address as a ctypes function)


def _compiled(ir_text: str, signature: Any) -> Any:
    from xla_teach.backends.cpu.jit import CpuJit

    if ir_text not in _COMPILED:
        _check_calls(ir_text)
        jit = CpuJit(ir_text, opt_level=2, keep_assembly=False)
        _COMPILED[ir_text] = (jit, signature(jit.function_address("kernel")))
    return _COMPILED[ir_text][1]


def run_map_kernel(solution: None, ir: str, dtype: str, x: np.ndarray) -> dict[str, Any]:
    """(In the runner.) ``out[i] = f(x[i])`` by the kernel of ``ir``, compiled once."""
    fn = _compiled(ir, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64))
    x = np.ascontiguousarray(x, dtype=np.dtype(dtype))
    out = np.empty_like(x)
    fn(out.ctypes.data, x.ctypes.data, x.size)
    return {"y": out}


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


# ---- shape_inference: the shape of a dot -------------------------------------------------------------------
def infer_shape(solution: ModuleType, entry: str, lhs: str, rhs: str, lhs_batch: list[int], rhs_batch: list[int],
                lhs_contracting: list[int], rhs_contracting: list[int]) -> dict[str, Any]:
    """The student's ``infer_dot_shape`` on two shapes (given as text); ``shape`` is the result's
    text, or None when it raised ``ValueError`` (the answer for a dot that has no shape)."""
    from xla_teach.hlo.shape import Shape
    from xla_teach.hlo.text.parser import parse_shape

    try:
        result = getattr(solution, entry)(parse_shape(lhs), parse_shape(rhs), list(lhs_batch), list(rhs_batch),
                                          list(lhs_contracting), list(rhs_contracting))
    except ValueError:
        return {"shape": None}
    if not isinstance(result, Shape):
        raise CaseFailed(f"{entry} must return a Shape (Shape.array(element_type, dims)), but returned {result!r}")
    return {"shape": result.to_text(print_layout=False)}


# ---- liveness: live ranges and peak memory ----------------------------------------------------------------
def liveness(solution: ModuleType, entry: list[str], text: str, order: list[str]) -> dict[str, Any]:
    """The student's ``live_ranges`` and ``peak_bytes`` on the ENTRY of ``text`` in ``order``."""
    module = parse_hlo(text)
    by_name = {i.name: i for i in module.entry.instructions}
    ranges_fn, peak_fn = (getattr(solution, name) for name in entry)
    ranges = ranges_fn(module.entry, [by_name[n] for n in order])
    if not isinstance(ranges, dict):
        raise CaseFailed(f"live_ranges must return a dict {{name: (start, end)}}, but returned {ranges!r:.80}")
    clean = {}
    for name, span in ranges.items():
        if not (isinstance(span, tuple | list) and len(span) == 2 and all(isinstance(v, int) for v in span)):
            raise CaseFailed(f"live_ranges()[{name!r}] must be a pair of ints (start, end), got {span!r:.80}")
        clean[str(name)] = [int(span[0]), int(span[1])]
    peak = peak_fn(module.entry, [by_name[n] for n in order])
    if not isinstance(peak, int):
        raise CaseFailed(f"peak_bytes must return an int, but returned {peak!r:.80}")
    return {"ranges": clean, "peak": int(peak)}


# ---- reduction_loop: a row-sum kernel's loops ---------------------------------------------------------------
def build_row_sum_kernel(emit: Callable[..., object]) -> str:
    """The IR text of ``void kernel(ptr dst, ptr src, i64 rows, i64 cols)`` around the student's loops."""
    module = ir.Module(name="row_sum_kernel")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64]), name="kernel")
    dst, src, rows, cols = fn.args
    for arg, name in zip(fn.args, ("dst", "src", "rows", "cols"), strict=True):
        arg.name = name
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    emit(b, dst, src, rows, cols)
    if b.block.is_terminated:
        raise CaseFailed("after emit_row_sum the builder's block already ends (with a branch or ret): leave the "
                         "builder positioned after the loops, where the kernel goes on")
    b.ret_void()
    return str(module)


def emit_row_sum_kernel(solution: ModuleType, entry: str) -> dict[str, Any]:
    """The IR text of the row-sum kernel around the student's loops (run by ``run_row_sum_kernel``
    in the grader's runner)."""
    ir_text = build_row_sum_kernel(getattr(solution, entry))
    _check_calls(ir_text)
    return {"ir": ir_text}


def run_row_sum_kernel(solution: None, ir: str, x: np.ndarray) -> dict[str, Any]:
    """(In the runner.) The kernel of ``ir`` on the rows of ``x`` (f32, row-major)."""
    fn = _compiled(ir, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64))
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(x.shape[0], np.float32)
    fn(out.ctypes.data, x.ctypes.data, x.shape[0], x.shape[1])
    return {"y": out}


# ---- autodiff_rule: atan2's vector-Jacobian product -----------------------------------------------------------
def _atan2_derivative_y(np_: Any, y: Any, x: Any) -> Any:
    return x / (x * x + y * y)


# The programs the grader differentiates, written against a NumPy-like module ``np_`` so that the
# same text runs traced (xla_teach.numpy, in the student's process) and in float64 NumPy (the
# grader's finite differences). "second" is the sum of the first derivative by y, which the
# student's process computes with grad itself (grad of grad) and the grader from the formula.
ATAN2_PROGRAMS: dict[str, Callable[..., Any]] = {
    "sum": lambda np_, y, x, w: np_.sum(np_.arctan2(y, x)),
    "weighted": lambda np_, y, x, w: np_.sum(w * np_.arctan2(y, x)),
    "chain": lambda np_, y, x, w: np_.sum(np_.sin(np_.arctan2(y * y + 0.5, x * w + 2.0)) * (x + 1.0)),
    "second": lambda np_, y, x, w: np_.sum(w * _atan2_derivative_y(np_, y, x)),
}


def install_atan2_rule(solution: ModuleType, entry: str) -> None:
    """The student's rule as the ``atan2`` primitive's vector-Jacobian product (in this process)."""
    import xla_teach.frontend.autodiff_rules  # noqa: F401 - registers the library's rules now, not over ours later
    from xla_teach.frontend import primitives

    rule = getattr(solution, entry)

    def vjp(cts: list[Any], inputs: list[Any], outputs: list[Any], **params: Any) -> list[Any]:
        result = rule(cts[0], list(inputs), outputs[0])
        if not isinstance(result, list | tuple) or len(result) != 2:
            raise CaseFailed(f"{entry} must return [ct_y, ct_x], a list of two arrays, but returned {result!r:.80}")
        return list(result)

    primitives.PRIMITIVES["atan2"].vjp = vjp


def atan2_gradient_hlo(solution: ModuleType, entry: str, program: str, y: np.ndarray, x: np.ndarray,
                       w: np.ndarray) -> dict[str, Any]:
    """The HLO text of the gradient program (of y and x) of an ``ATAN2_PROGRAMS`` program, traced with
    the student's rule installed: the grader evaluates it with its own interpreter, so the answer
    comes from what the rule built, not from anything else in this process."""
    import xla_teach.numpy as xnp
    from xla_teach.frontend.autodiff import grad
    from xla_teach.frontend.jit import jit

    install_atan2_rule(solution, entry)
    w = np.asarray(w)
    if program == "second":
        def first(yy: Any, xx: Any) -> Any:
            return xnp.sum(w * grad(lambda a, b: xnp.sum(xnp.arctan2(a, b)), argnums=0)(yy, xx))
        gradient = grad(first, argnums=(0, 1))
    else:
        fn = ATAN2_PROGRAMS[program]
        gradient = grad(lambda yy, xx: fn(xnp, yy, xx, w), argnums=(0, 1))
    return {"hlo": jit(gradient).lower(y, x).as_text("hlo")}


# ---- sharding: each device's piece, and the collective that moves it -----------------------------------------
def device_slices(solution: ModuleType, entry: str, dims: list[int], sharding: str, devices: int) -> dict[str, Any]:
    """The student's ``device_slices`` on a sharding given as HLO text."""
    from xla_teach.hlo.sharding import parse_sharding

    result = getattr(solution, entry)(tuple(dims), parse_sharding(sharding), devices)
    if not isinstance(result, dict):
        raise CaseFailed(f"device_slices must return a dict {{device: [(start, limit), ...]}}, got {result!r:.80}")
    return {"slices": {str(k): [[int(a), int(b)] for a, b in v] if isinstance(v, list | tuple) else v
                       for k, v in result.items()}}


def reshard(solution: ModuleType, entry: str, dims: list[int], src: str, dst: str, devices: int) -> dict[str, Any]:
    """The student's ``reshard`` on two shardings given as HLO text."""
    from xla_teach.hlo.sharding import parse_sharding

    answer = getattr(solution, entry)(tuple(dims), parse_sharding(src), parse_sharding(dst), devices)
    return {"collective": answer if isinstance(answer, str) else repr(answer)}


# ---- read_dump: reading XLA's own optimized dumps --------------------------------------------------------------
def read_dump(solution: ModuleType, entry: str, dump: str, args: dict[str, Any]) -> dict[str, Any]:
    """The student's ``entry`` on a real XLA dump (parsed here) and ``args``; the answer as plain data."""
    answer = getattr(solution, entry)(_parsed(dump), **args)
    if isinstance(answer, tuple):
        answer = list(answer)
    if not (answer is None or isinstance(answer, str | int | list)):
        raise CaseFailed(f"{entry} returned a {type(answer).__name__}: a str, an int, a list or None was expected")
    return {"answer": answer}


# ---- capstone: the student's whole optimization pipeline ----------------------------------------------------
def run_pipeline(solution: ModuleType, entry: str, text: str) -> dict[str, Any]:
    """``build_pipeline()``'s passes, run in order on ``text``; the module after them and the
    passes' names (judged in the grader's process)."""
    passes = getattr(solution, entry)()
    if not isinstance(passes, list | tuple) or not passes:
        raise CaseFailed(f"{entry}() must return a non-empty list of passes, but returned {passes!r}")
    module = parse_hlo(text)
    for p in passes:
        if not isinstance(p, HloPass):
            raise CaseFailed(f"{entry}() returned {p!r}, which is not an HloPass (an instance, not the class)")
        changed = p.run(module)
        if not isinstance(changed, bool | np.bool_):
            raise CaseFailed(f"{type(p).__name__}.run() must return True or False, but returned {changed!r}")
    check_verifies(module, text)
    return {"text": _module_text(module), "passes": [getattr(p, "name", type(p).__name__) for p in passes]}


TASKS: dict[str, Callable[..., dict[str, Any]]] = {
    "run_pass": run_pass, "simplify": simplify, "decide": decide,
    "find_broken_pass": find_broken_pass, "infer_shape": infer_shape,
    "liveness": liveness, "atan2_gradient_hlo": atan2_gradient_hlo,
    "emit_map_kernel": emit_map_kernel, "emit_row_sum_kernel": emit_row_sum_kernel,
    "device_slices": device_slices, "reshard": reshard, "read_dump": read_dump,
    "run_pipeline": run_pipeline,
}
# What the grader's runner does with what a student's code made (see sandbox.StudentProcess.runner).
RUNNER_TASKS: dict[str, Callable[..., dict[str, Any]]] = {
    "run_map_kernel": run_map_kernel, "run_row_sum_kernel": run_row_sum_kernel,
}
