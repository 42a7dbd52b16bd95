"""The host CPU as LLVM sees it: its name and features, asked once, and target machines for it
(used by the JIT, the codegen worker and ahead-of-time compilation)."""

from __future__ import annotations

import functools

import llvmlite.binding as llvm


@functools.cache
def initialize_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@functools.cache
def host_cpu() -> tuple[str, str]:
    """The host's CPU name and feature string, asked of LLVM once (each ask reads ``cpuid`` and
    builds a string map: half a millisecond, every compile)."""
    initialize_llvm()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def host_target_machine(opt_level: int = 3) -> llvm.TargetMachine:
    """A new target machine for the host (MCJIT takes ownership of the one it is given)."""
    initialize_llvm()
    target = llvm.Target.from_default_triple()
    cpu, features = host_cpu()
    return target.create_target_machine(
        cpu=cpu, features=features, opt=min(max(opt_level, 0), 3), codemodel="jitdefault", jit=True)
