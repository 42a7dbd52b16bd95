"""Hints for the graded exercises: one per check, shown before the full failure messages.

The grader's messages give the module, the expected value and the value a solution returned:
exact, but often long. A hint is the next thing a teaching assistant would say. It points to the
idea a failing solution usually misses, without giving the code. The report shows, for each
failed check, a one-line summary of the first failure and this hint. ``--detail full`` (or
``report.text("full")``) adds every message (``grading.GradeReport``).
"""

from __future__ import annotations

HINTS: dict[str, dict[str, str]] = {
    "shape_inference": {
        "matrix-products": "the result is the lhs free dimensions, then the rhs free ones: every dimension that is "
                           "neither batch nor contracting, each in its operand's order",
        "batch-dimensions": "batch dimensions come first in the result, in the order of the batch lists -- not in "
                            "the order they sit in the operands",
        "several-contracting": "contracting dimensions are paired by position in the two lists; all of them leave "
                               "the result",
        "invalid-dots": "check everything before building the result: list lengths, ranges, repeats (a dimension "
                        "in two lists too), paired sizes, element types",
    },
    "dce": {
        "removes-dead-code": "a value is dead when nothing reads it; removing one can make its operands dead, so "
                             "walk users before operands (reverse post order) or repeat until nothing changes",
        "keeps-parameters-and-side-effects": "an instruction with a side effect (instr.has_side_effect()) and "
                                             "every parameter stay, even when nothing reads them",
        "removes-unused-computations": "after removing instructions, a computation that no remaining instruction "
                                       "calls (and is not the ENTRY) goes too",
        "reports-change": "return whether this run removed anything: a second run on its own output finds nothing",
    },
    "cse": {
        "merges-duplicates": "visit operands before users (post order), so that two chains become equal step by "
                             "step as their operands merge",
        "commutative-operands": "for add, multiply, maximum, minimum, and, or... compare the operands as a set, not "
                                "in order",
        "constants-by-value": "two constants are the same when their shapes and literal values are equal, not when "
                              "they are the same object",
        "respects-attributes": "the key must include every attribute (dimensions, direction, slice limits, "
                               "comparison type...); never merge parameters or side effects",
        "reports-change": "return True only when something merged: a second run has nothing left to merge",
    },
    "algsimp_rule": {
        "multiply-by-one": "a one can be a scalar constant, a broadcast of one, or a constant array of ones, on "
                           "either side of the multiply",
        "multiply-look-alikes": "check every element is exactly one: x * 2, an array with a single 1, or x * y "
                                "must stay as they are (return None and create nothing)",
        "integer-subtract-self": "i - i is 0 only when both operands are the very same instruction; build a zero "
                                 "of the same shape and type",
        "float-subtract-self-stays": "for floats, x - x is NaN when x is inf or NaN: the rewrite would change the "
                                     "result, so leave floats alone",
    },
    "fusion_decision": {
        "rule-by-rule": "read the three documented rules one at a time: can the consumer host a fusion, is the "
                        "producer computable per element, would fusing duplicate expensive work",
        "random-decisions": "a producer with users besides this consumer is copied into the fusion: allowed only "
                            "when it is not expensive (producer.info.expensive)",
        "fusion-pass": "by the time it is asked, a consumer may already be a fusion: it hosts more producers "
                       "unless its fused root is a tuple; a producer fusion must be kLoop with an array result",
    },
    "elemental_emitter": {
        "compiles": "emit in the input's own type (x.type), for float and for double: constants too",
        "moderate-inputs": "log(1 + e^x) loses digits when e^x is small next to 1: log1p(exp(x)) keeps them",
        "large-positive-inputs": "for large x, e^x overflows; softplus(x) = x + log1p(e^-x), which never does",
        "large-negative-inputs": "for very negative x, softplus(x) is e^x itself: make sure nothing rounds it to 0 "
                                 "early",
        "special-values": "NaN must stay NaN, +inf give +inf, -inf give +0; a select on the sign of x keeps both "
                          "branches safe",
    },
    "reduction_loop": {
        "sums-rows": "two loops, rows outside and columns inside; the accumulator starts at 0.0 for every row and "
                     "is stored after the inner loop",
        "edge-sizes": "test the bound in the loop header before the first iteration, so that 0 rows or 0 columns "
                      "run nothing",
        "in-order": "add the elements one after another into one accumulator: no reassociation, no pairwise sums",
    },
    "liveness": {
        "ranges-in-schedule-order": "a value lives from the position that defines it to the last position that "
                                    "reads it; parameters from 0, the ROOT to the end",
        "ranges-any-order": "use the positions of the order you are given, not the instructions' order in the "
                            "computation; a value nothing reads dies where it is defined",
        "peak-memory": "at every position add up the sizes of the values live there; the peak is the largest sum",
    },
    "bisect": {
        "finds-the-broken-pass": "compare what the module *computes* after each pass (run it on the interpreter), "
                                 "not whether its text changed: real passes change the text too",
        "no-false-alarm": "when every stage computes what the original computes, the answer is None",
    },
    "autodiff_rule": {
        "partial-derivatives": "d/dy atan2(y, x) = x / (x^2 + y^2) and d/dx = -y / (x^2 + y^2), in every quadrant",
        "uses-the-cotangent": "the rule returns the cotangent times each partial: ct * dy and ct * dx",
        "chain-rule": "return cotangents for the rule's own inputs only; the tracer chains them through the rest",
        "differentiable-rule": "write the rule with xla_teach.numpy operations (not NumPy), so that grad of grad "
                               "can trace it again",
    },
    "sharding": {
        "replicated-and-even-tiles": "a tile is ceil(size / tiles) long; tile i of a dimension spans "
                                     "[i * tile, (i + 1) * tile), clipped to the size",
        "device-order": "which device holds which tile comes from tile_assignment(): find each device's position "
                        "in it, not its number",
        "copies": "with last_tile_dim_replicate the last tile dimension counts copies: it cuts nothing",
        "uneven-sizes": "clip every span to the array's size: the last tile may be short, or even empty",
        "reshard": "compare who holds what: whole on every device after -> all-gather; whole before -> "
                   "dynamic-slice; the same cuts on other devices -> collective-permute; other cuts -> all-to-all",
    },
    "read_dump": {
        "kernels": "the ENTRY's instructions that run are those that are not parameters, constants, tuples, "
                   "get-tuple-elements or bitcasts; keep the schedule's order",
        "finds-the-fusion": "an op of the program is named in op_name metadata; a fused instruction's holder is "
                            "the ENTRY fusion that calls its computation",
        "stack-frames": "look each row up by the number it starts with: a frame names a file_location_id, which "
                        "names a file_name_id and a line",
        "fused-lines": "the line of every instruction inside the fusion (nested fusions too) that has a "
                       "stack_frame_id, each line once, sorted",
    },
    "capstone": {
        "removes-dead-code": "dead code elimination must run after the passes that can leave values unused: the "
                             "simplifier leaves the operands of what it replaced, CSE the duplicates it merged",
        "merges-duplicates": "CSE has to run before fusion: once two equal products sit in different fusions, "
                             "they no longer look the same",
        "applies-your-rule": "put simplifier_with(rewrite) in the list; it must see the multiply before fusion "
                             "hides it inside a fused computation",
        "fuses-like-the-reference": "fusion only sees what is left: merge duplicates and drop dead values first, "
                                    "then fuse, then remove what fusion left unused",
        "runs-compiled": "this check runs once the pipeline is as good as the reference: fix the kernel count "
                         "first",
    },
}


def hint(exercise: str, check: str) -> str:
    """The hint for ``check`` of ``exercise`` ("" if none)."""
    return HINTS.get(exercise, {}).get(check, "")
