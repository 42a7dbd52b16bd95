"""The GPU backend: HLO to LLVM IR for ``nvptx64-nvidia-cuda``, PTX through llvmlite,
run with cuda-python's driver API -- plus an NVRTC route that compiles CUDA C for a fusion.

Without a GPU (the usual case on our machines and in CI) everything up to PTX works,
and executing raises :class:`~xla_teach.backends.gpu.runtime.GpuUnavailableError`
saying plainly that no CUDA device/driver is present.
"""
