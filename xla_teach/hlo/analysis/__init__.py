"""Analyses of a module that change nothing: what it costs (:mod:`.cost`, XLA's HloCostAnalysis)."""
