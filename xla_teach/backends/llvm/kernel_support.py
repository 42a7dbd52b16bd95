"""What both LLVM backends do the same way around their kernels.

* :func:`llvm_name` / :func:`ptx_name` -- an HLO name as an LLVM / PTX symbol;
* :func:`overlapping` -- which of a kernel's buffer slices share bytes with another (those
  arguments cannot be ``noalias``);
* :func:`hlo_comment` / :func:`annotate_kernels` -- the HLO text of each kernel written as a
  comment above its ``define`` in the LLVM IR listing (as XLA's IR dumps do);
* :func:`optimize_module` -- LLVM's standard ``-O<level>`` pipeline, for the host or NVPTX.
"""

from __future__ import annotations

import re

import llvmlite.binding as llvm

from xla_teach.hlo.ir import HloInstruction
from xla_teach.passes.scheduling.buffer_assignment import BufferSlice


def llvm_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", name)


def ptx_name(name: str) -> str:
    """PTX identifiers allow letters, digits, ``_`` and ``$`` only: ``add.1`` becomes ``add_1``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return name if name[:1].isalpha() or name[:1] == "_" else f"_{name}"


def kernel_symbols(instruction_name: str) -> list[str]:
    """The symbols a kernel named after an instruction may have: the CPU's and the GPU's."""
    return list(dict.fromkeys((llvm_name(instruction_name), ptx_name(instruction_name))))


def overlapping(slices: list[BufferSlice]) -> list[bool]:
    """For each slice: does any *other* slice share bytes with it?"""
    result = []
    for i, a in enumerate(slices):
        hit = False
        for j, other in enumerate(slices):
            if i == j or a.allocation is not other.allocation:
                continue
            if a.offset < other.offset + other.size and other.offset < a.offset + a.size:
                hit = True
        result.append(hit)
    return result


def hlo_comment(instr: HloInstruction) -> str:
    lines = [instr.to_text(print_metadata=False)]
    if instr.opcode == "fusion":
        lines += ["  " + i.to_text(print_metadata=False) for i in instr.fused_computation.instructions]
    return "\n".join(lines)


def annotate_kernels(ir_text: str, comments: dict[str, str]) -> str:
    """Insert ``; <HLO text>`` comment lines above each kernel's ``define``."""
    lines = ir_text.splitlines()
    out = []
    for line in lines:
        match = re.match(r'define (?:dso_local )?void @"?([^"(]+)"?\(ptr', line)
        if match and match.group(1) in comments:
            for text in comments[match.group(1)].splitlines():
                out.append(f"; {text}")
        out.append(line)
    return "\n".join(out) + "\n"


# The passes run on a module of vector code (llvmlite's names): inline each kernel's wrapped body,
# make stack slots (accumulators, loop state) registers, then simplify, with instcombine again
# after the loops are rotated into their do-while form.
SHORT_PIPELINE = ("always_inliner", "sroa", "instruction_combine", "simplify_cfg", "loop_rotate",
                  "instruction_combine", "simplify_cfg", "dead_code_elimination")


def optimize_module(module: llvm.ModuleRef, tm: llvm.TargetMachine, opt_level: int,
                    vector_code: bool = False) -> None:
    """LLVM's standard -O<level> pipeline (with the loop and SLP vectorizers) -- or, for a module
    whose kernels are ``vector_code`` already (a row kernel's explicit ``<8 x float>`` loops, BLAS
    calls), a short one: :data:`SHORT_PIPELINE`.

    Most of ``-O3``'s time on a kernel goes to finding vector code for its loops (the loop
    vectorizer tries every width and interleave count) and to the loop passes around it; code that
    is vector code already needs only its stack slots made registers, inlining, and clean-up:
    a third of the time, for the same machine code in its hot loops."""
    if opt_level <= 0:
        return
    pto = llvm.create_pipeline_tuning_options(speed_level=min(opt_level, 3))
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_interleaving = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    if vector_code:
        pm = llvm.create_new_module_pass_manager()
        for add in SHORT_PIPELINE:
            getattr(pm, f"add_{add}_pass")()
    else:
        pm = pb.getModulePassManager()
    try:
        pm.run(module, pb)
    finally:  # freed now: left to the garbage collector, ~70 KiB per compile stayed allocated
        pm.close()
        pb.close()
        pto.close()
