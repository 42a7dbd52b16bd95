"""The LLVM layer shared by the CPU and GPU backends: element types, arrays, loops, the elemental emitter, math."""
