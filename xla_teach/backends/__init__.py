"""Backends: the reference interpreter, the CPU backend (LLVM via llvmlite) and the GPU backend (NVPTX)."""
