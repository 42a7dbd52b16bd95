"""Passes that prepare a module for code generation, run by both the CPU and the GPU pipelines:
``reshape-to-bitcast`` (reshapes that move no bytes become bitcasts) and
``tree_reduction_rewriter`` (very long reductions become two, so that many threads share them)."""
