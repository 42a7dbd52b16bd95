"""The second route to PTX: write a loop fusion as CUDA C and compile it with NVRTC.

XLA itself goes HLO -> LLVM IR -> PTX (the route of :mod:`~xla_teach.backends.gpu.ir_emitter`).
Many hand-written GPU kernels go CUDA C -> NVRTC -> PTX instead. This module writes the
*same* fusion both ways so a student can put the two PTX files side by side::

    routes = compare_routes(compile_module(hlo_text, "gpu"))   # its first loop fusion
    print(routes.cuda_source)                    # one thread per element, as C
    print(routes.nvrtc_ptx[:2000]); print(routes.llvm_ptx[:2000])

The C kernel is written the way the elemental emitter thinks: the output index is split
into one variable per dimension, and each fused instruction becomes one local variable
computed from its operands *at the index it needs* (a broadcast reads its operand at fewer
dimensions, a transpose at permuted ones, a slice at shifted ones). Supported: elementwise
ops, broadcast, reshape, transpose, slice, iota and scalar constants, over f32, f64, s32,
s64, u32, u64 and pred, with default (row-major) layouts; anything else is a clear error.

NVRTC ships on PyPI (``nvidia-cuda-nvrtc``) and needs no GPU, so this route is compiled and
assembled in the normal tests. Versions are pinned in ``pyproject.toml`` so that the PTX ISA
NVRTC writes is one the installed ``ptxas`` accepts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_teach.backends.llvm.kernel_support import ptx_name
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType


class CudaCUnsupported(ValueError):
    """The fusion uses something the CUDA C writer does not handle."""


C_TYPES = {PrimitiveType.F32: "float", PrimitiveType.F64: "double", PrimitiveType.S32: "int",
           PrimitiveType.S64: "long long", PrimitiveType.U32: "unsigned int",
           PrimitiveType.U64: "unsigned long long", PrimitiveType.PRED: "bool"}
_F32_FUNCS = {"exponential": "expf", "exponential-minus-one": "expm1f", "log": "logf", "log-plus-one": "log1pf",
              "sqrt": "sqrtf", "rsqrt": "rsqrtf", "cbrt": "cbrtf", "tanh": "tanhf", "sine": "sinf",
              "cosine": "cosf", "tan": "tanf", "floor": "floorf", "ceil": "ceilf", "abs": "fabsf",
              "round-nearest-afz": "roundf", "round-nearest-even": "rintf", "erf": "erff"}
_BINARY_OPS = {"add": "+", "subtract": "-", "multiply": "*", "and": "&", "or": "|", "xor": "^"}
_COMPARE_OPS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _c_type(shape: Shape) -> str:
    if shape.element_type not in C_TYPES:
        raise CudaCUnsupported(f"element type {shape.element_type.value} is not supported by the CUDA C route")
    return C_TYPES[shape.element_type]


def _check_layout(shape: Shape, what: str) -> None:
    if shape.rank and tuple(shape.minor_to_major()) != tuple(range(shape.rank - 1, -1, -1)):
        raise CudaCUnsupported(f"{what} has a non-default layout {shape}; the CUDA C route assumes row-major")


class _KernelWriter:
    def __init__(self, fusion: HloInstruction) -> None:
        self.fusion = fusion
        self.lines: list[str] = []
        self.count = 0
        self.cache: dict[tuple[int, tuple[str, ...]], str] = {}

    def temp(self, ctype: str, expr: str) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"  const {ctype} {name} = {expr};")
        return name

    def value(self, instr: HloInstruction, index: tuple[str, ...]) -> str:
        key = (instr.unique_id, index)
        if key not in self.cache:
            self.cache[key] = self._emit(instr, index)
        return self.cache[key]

    def _emit(self, instr: HloInstruction, index: tuple[str, ...]) -> str:  # noqa: C901 - one case per opcode
        op, shape = instr.opcode, instr.shape
        ctype = _c_type(shape)
        if op == "parameter":
            _check_layout(shape, instr.name)
            return self.temp(ctype, f"p{instr.parameter_number}[{_linear(index, shape)}]")
        if op == "constant":
            if shape.rank:
                raise CudaCUnsupported(f"{instr.name}: only scalar constants are supported")
            value = np.asarray(instr.attrs["literal"]).reshape(())
            return self.temp(ctype, _literal(value, shape))
        if op == "iota":
            return self.temp(ctype, f"({ctype})({index[int(instr.attrs['iota_dimension'])]})")
        if op == "broadcast":
            dims = list(instr.attrs["dimensions"])
            return self.value(instr.operand(0), tuple(index[d] for d in dims))
        if op in ("reshape", "bitcast", "copy"):
            operand = instr.operand(0)
            if op == "copy" or list(operand.shape.dimensions) == list(shape.dimensions):
                return self.value(operand, index)
            linear = self.temp("long long", _linear(index, shape) or "0")
            return self.value(operand, _delinearize(linear, operand.shape))
        if op == "transpose":
            perm = list(instr.attrs["dimensions"])
            operand_index = [""] * shape.rank
            for k, d in enumerate(perm):
                operand_index[d] = index[k]
            return self.value(instr.operand(0), tuple(operand_index))
        if op == "slice":
            parts = []
            for i, s in zip(index, instr.attrs["slice"], strict=True):
                parts.append(f"({i} * {s.stride} + {s.start})" if (s.stride, s.start) != (1, 0) else i)
            return self.value(instr.operand(0), tuple(parts))
        operands = [self.value(o, index) for o in instr.operands]
        is_float = shape.element_type.is_float
        if op == "negate":
            return self.temp(ctype, f"-{operands[0]}")
        if op == "not":
            return self.temp(ctype, f"!{operands[0]}" if shape.element_type.is_pred else f"~{operands[0]}")
        if op in _F32_FUNCS and is_float:
            fn = _F32_FUNCS[op] if shape.element_type is PrimitiveType.F32 else _F32_FUNCS[op].rstrip("f")
            if op == "rsqrt" and shape.element_type is PrimitiveType.F64:
                fn = "rsqrt"
            return self.temp(ctype, f"{fn}({operands[0]})")
        if op == "logistic" and is_float:
            one = "1.0f" if shape.element_type is PrimitiveType.F32 else "1.0"
            exp = "expf" if shape.element_type is PrimitiveType.F32 else "exp"
            return self.temp(ctype, f"{one} / ({one} + {exp}(-{operands[0]}))")
        if op in _BINARY_OPS and not (is_float and op in ("and", "or", "xor")):
            return self.temp(ctype, f"{operands[0]} {_BINARY_OPS[op]} {operands[1]}")
        if op == "divide" and is_float:
            return self.temp(ctype, f"{operands[0]} / {operands[1]}")
        if op in ("maximum", "minimum") and is_float:
            # NaN-propagating, as HLO requires (fmaxf would drop the NaN).
            cmp = ">" if op == "maximum" else "<"
            a, b = operands
            expr = f"({a} != {a} || {a} {cmp} {b}) ? {a} : (({b} != {b}) ? {b} : ({a} {cmp}= {b} ? {a} : {b}))"
            return self.temp(ctype, expr)
        if op in ("maximum", "minimum"):
            cmp = ">" if op == "maximum" else "<"
            return self.temp(ctype, f"{operands[0]} {cmp} {operands[1]} ? {operands[0]} : {operands[1]}")
        if op == "power" and is_float:
            fn = "powf" if shape.element_type is PrimitiveType.F32 else "pow"
            return self.temp(ctype, f"{fn}({operands[0]}, {operands[1]})")
        if op == "compare":
            return self.temp("bool", f"{operands[0]} {_COMPARE_OPS[str(instr.attrs['direction'])]} {operands[1]}")
        if op == "select":
            return self.temp(ctype, f"{operands[0]} ? {operands[1]} : {operands[2]}")
        if op == "convert":
            if shape.element_type.is_integral and instr.operand(0).shape.element_type.is_float:
                raise CudaCUnsupported(f"{instr.name}: float-to-int convert (XLA saturates; C does not)")
            return self.temp(ctype, f"({ctype})({operands[0]})")
        raise CudaCUnsupported(f"{instr.name}: '{op}' is not supported by the CUDA C route")


def _literal(value: np.ndarray, shape: Shape) -> str:
    v = value.item()
    if shape.element_type.is_pred:
        return "true" if v else "false"
    if shape.element_type.is_float:
        f = float(v)
        if math.isnan(f):
            return "__int_as_float(0x7fc00000)" if shape.element_type is PrimitiveType.F32 else "nan(\"\")"
        if math.isinf(f):
            return ("-" if f < 0 else "") + ("__int_as_float(0x7f800000)" if shape.element_type is PrimitiveType.F32
                                             else "__longlong_as_double(0x7ff0000000000000LL)")
        return f"{f!r}f" if shape.element_type is PrimitiveType.F32 else repr(f)
    return f"({C_TYPES[shape.element_type]}){int(v)}"


def _linear(index: tuple[str, ...], shape: Shape) -> str:
    terms, stride = [], 1
    for d in range(shape.rank - 1, -1, -1):
        if shape.dimensions[d] != 1:
            terms.append(index[d] if stride == 1 else f"{index[d]} * {stride}LL")
        stride *= shape.dimensions[d]
    return " + ".join(reversed(terms)) or "0"


def _delinearize(linear: str, shape: Shape) -> tuple[str, ...]:
    parts, stride = [], 1
    strides = []
    for d in range(shape.rank - 1, -1, -1):
        strides.append(stride)
        stride *= shape.dimensions[d]
    strides.reverse()
    for d in range(shape.rank):
        parts.append(f"(({linear} / {strides[d]}LL) % {shape.dimensions[d]}LL)")
    return tuple(parts)


def fusion_to_cuda_c(fusion: HloInstruction, name: str | None = None) -> str:
    """CUDA C source of one loop fusion (or a single elementwise instruction's fusion)."""
    if fusion.opcode != "fusion":
        raise CudaCUnsupported(f"{fusion.name} is a {fusion.opcode}, not a fusion")
    shape = fusion.shape
    if shape.is_tuple:
        raise CudaCUnsupported(f"{fusion.name}: multi-output fusions are not supported by the CUDA C route")
    _check_layout(shape, fusion.name)
    kernel = ptx_name(name or fusion.name)
    writer = _KernelWriter(fusion)
    index = tuple(f"i{d}" for d in range(shape.rank))
    result = writer.value(fusion.fused_computation.root, index)
    params = [f"const {_c_type(p.shape)}* __restrict__ p{p.parameter_number}"
              for p in fusion.fused_computation.parameter_instructions]
    params.append(f"{_c_type(shape)}* __restrict__ out")
    n = shape.element_count()
    header = [
        f"// {fusion.to_text(print_metadata=False)}",
        *[f"//   {i.to_text(print_metadata=False)}" for i in fusion.fused_computation.instructions],
        f'extern "C" __global__ void {kernel}({", ".join(params)}) {{',
        "  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        f"  if (t >= {n}LL) return;  // the last block's spare threads",
    ]
    remaining = "t"
    for d in range(shape.rank - 1, -1, -1):
        header.append(f"  const long long i{d} = {remaining} % {shape.dimensions[d]}LL;")
        if d:
            header.append(f"  const long long r{d} = {remaining} / {shape.dimensions[d]}LL;")
            remaining = f"r{d}"
    return "\n".join(header + writer.lines + [f"  out[t] = {result};", "}"]) + "\n"


def compile_cuda_c(source: str, arch: str = "sm_80", name: str = "fusion.cu") -> str:
    """PTX for ``source`` from NVRTC (``cuda.bindings.nvrtc``); errors carry NVRTC's log."""
    from cuda.bindings import nvrtc

    from xla_teach.backends.gpu.nvptx import normalize_arch

    def check(result):  # type: ignore[no-untyped-def]
        err, *values = result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
        return values[0] if len(values) == 1 else values

    program = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []))
    compute = normalize_arch(arch).replace("sm_", "compute_")
    options = [f"--gpu-architecture={compute}".encode(), b"-default-device", b"--std=c++17"]
    err, = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        size = check(nvrtc.nvrtcGetProgramLogSize(program))
        log = b" " * size
        check(nvrtc.nvrtcGetProgramLog(program, log))
        raise CudaCUnsupported(f"NVRTC could not compile the generated CUDA C:\n{log.decode(errors='replace')}")
    size = check(nvrtc.nvrtcGetPTXSize(program))
    ptx = b" " * size
    check(nvrtc.nvrtcGetPTX(program, ptx))
    nvrtc.nvrtcDestroyProgram(program)
    return ptx.decode().rstrip("\0")


@dataclass
class RouteComparison:
    """One fusion through both routes."""

    fusion: str  # the HLO name of the fusion
    kernel: str  # the kernel's name in both PTX files
    cuda_source: str
    nvrtc_ptx: str
    llvm_ptx: str  # the whole module's PTX from the LLVM route
    executable: object  # the GPU executable of the LLVM route

    def llvm_kernel_ptx(self) -> str:
        """Just this fusion's ``.entry`` from the LLVM route's PTX."""
        return _entry_text(self.llvm_ptx, self.kernel)

    def nvrtc_kernel_ptx(self) -> str:
        return _entry_text(self.nvrtc_ptx, self.kernel)


def _entry_text(ptx: str, kernel: str) -> str:
    start = ptx.find(f".entry {kernel}(")
    if start < 0:
        return ""
    end = ptx.find("\n}", start)
    return ptx[ptx.rfind("\n", 0, start) + 1: end + 2]


def compare_routes(executable: Any, fusion_name: str | None = None, arch: str = "") -> RouteComparison:
    """Write the chosen loop fusion of a GPU ``executable`` (``compile_module(text, "gpu")``; by
    default its first fusion the CUDA C writer supports) as CUDA C, and compile that with NVRTC
    for ``arch`` (default: the architecture the executable's PTX targets)."""
    target = re.search(r"^\s*\.target\s+(sm_\w+)", executable.artifacts.ptx or "", flags=re.MULTILINE)
    arch = arch or (target.group(1) if target else "sm_80")
    fusions = [i for i in executable.module.entry.instructions if i.opcode == "fusion"]
    if fusion_name is not None:
        fusions = [f for f in fusions if f.name == fusion_name]
        if not fusions:
            raise ValueError(f"no fusion named '{fusion_name}' in the optimized module")
    errors = []
    for fusion in fusions:
        try:
            source = fusion_to_cuda_c(fusion)
        except CudaCUnsupported as err:
            errors.append(str(err))
            continue
        kernel = ptx_name(fusion.name)
        return RouteComparison(fusion.name, kernel, source, compile_cuda_c(source, arch),
                               executable.artifacts.ptx, executable)
    raise CudaCUnsupported("no fusion of the optimized module can be written as CUDA C"
                           + (": " + "; ".join(errors) if errors else " (it has no fusions)"))


def run_nvrtc_fusion(routes: RouteComparison, args: list[np.ndarray]) -> np.ndarray:
    """Launch the NVRTC route's kernel on the device with the module's ENTRY arguments (the fusion's
    operands must be ENTRY parameters) and return its output -- to compare with the LLVM route."""
    from xla_teach.backends.gpu.executable import download, upload
    from xla_teach.backends.gpu.kernel_builder import linear_launch
    from xla_teach.backends.gpu.runtime import CudaContext

    module = routes.executable.module  # type: ignore[attr-defined]
    fusion = next(i for i in module.entry.instructions if i.name == routes.fusion)
    if any(op.opcode != "parameter" for op in fusion.operands):
        raise ValueError(f"{fusion.name}: run_nvrtc_fusion needs a fusion whose operands are ENTRY parameters")
    ctx = CudaContext.get()
    cu_module = ctx.load_module(routes.nvrtc_ptx)
    function = ctx.function(cu_module, routes.kernel)
    inputs = [upload(ctx, np.asarray(args[op.parameter_number]), op.shape) for op in fusion.operands]
    out = upload(ctx, np.zeros(fusion.shape.dimensions, fusion.shape.element_type.dtype), fusion.shape)
    launch = linear_launch(max(fusion.shape.element_count(), 1))
    ctx.launch(function, launch.blocks, launch.threads, [a.ptr for a in inputs] + [out.ptr])
    ctx.synchronize()
    return np.array(download(ctx, out))
