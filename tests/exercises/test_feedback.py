"""Plausible wrong solutions lose exactly the points of the property they break, and the
feedback names that property, the module and what was expected."""

from __future__ import annotations

from pathlib import Path

from tests.exercises.exercise_test_utils import check_points, failed_checks, grade, messages, variant, write


# ---- dce ------------------------------------------------------------------------------------------
def test_dce_that_removes_side_effects_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "dce", ("\n            and not instr.has_side_effect())", ")"))
    report = grade("dce", wrong)
    assert failed_checks(report) == {"keeps-parameters-and-side-effects"}
    text = messages(report, "keeps-parameters-and-side-effects")
    assert "live instruction(s) removed: print" in text and "custom_call_has_side_effect=true" in text


def test_dce_that_keeps_unused_computations_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "dce", ("                module.remove_computation(comp)\n                changed = True\n",
                                      "                pass\n"))
    report = grade("dce", wrong)
    assert failed_checks(report) == {"removes-unused-computations"}
    assert "nothing calls any more are still there: maximum_f32" in messages(report, "removes-unused-computations")


def test_dce_that_misreports_change_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "dce", ("        return changed\n        # END", "        return True\n        # END"))
    report = grade("dce", wrong)
    assert failed_checks(report) == {"reports-change"}
    assert "a second time returned True" in messages(report, "reports-change")


# ---- cse ------------------------------------------------------------------------------------------
def test_cse_that_ignores_attributes_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "cse", ("    return (instr.opcode, instr.shape.to_text(), tuple(operands), attrs)",
                                      "    return (instr.opcode, instr.shape.to_text(), tuple(operands))"))
    report = grade("cse", wrong)
    assert "respects-attributes" in failed_checks(report)
    assert check_points(report)["merges-duplicates"] == (3, 3)
    assert "too few: instructions were merged that compute different values" in messages(report, "respects-attributes")


def test_cse_without_commutativity_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "cse", ("    if instr.opcode in COMMUTATIVE:\n        operands.sort()\n", ""))
    report = grade("cse", wrong)
    assert failed_checks(report) == {"commutative-operands"}
    assert "still compute the same value" in messages(report, "commutative-operands")


def test_cse_that_merges_side_effects_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "cse", (' or instr.has_side_effect()', ""))
    report = grade("cse", wrong)
    assert failed_checks(report) == {"respects-attributes"}
    assert "custom-call: 1 (expected 2)" in messages(report, "respects-attributes")


# ---- algsimp_rule ---------------------------------------------------------------------------------------
def test_rule_that_folds_float_self_subtraction_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "algsimp_rule", ("if lhs is rhs and instr.shape.element_type.is_integral:",
                                               "if lhs is rhs:"))
    report = grade("algsimp_rule", wrong)
    assert failed_checks(report) == {"float-subtract-self-stays"}
    assert "inf - inf and NaN - NaN are NaN" in messages(report, "float-subtract-self-stays")


def test_rule_that_folds_any_constant_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "algsimp_rule", ("return value is not None and value == 1",
                                               "return value is not None"))
    report = grade("algsimp_rule", wrong)
    assert failed_checks(report) == {"multiply-look-alikes"}
    assert "rewritten but must stay: keep_times_two" in messages(report, "multiply-look-alikes")


def test_rule_that_misses_ones_on_the_left_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "algsimp_rule", ("        if _is_all_ones(lhs):\n            return rhs\n", ""))
    report = grade("algsimp_rule", wrong)
    assert "multiply-by-one" in failed_checks(report)
    assert "not rewritten: fold_" in messages(report, "multiply-by-one")


def test_rule_returning_a_detached_instruction_is_caught(tmp_path: Path) -> None:
    solution = write(tmp_path, "detached.py", '''
from xla_teach.hlo.ir import HloInstruction
def rewrite(instr):
    if instr.opcode == "subtract" and instr.operand(0) is instr.operand(1):
        return HloInstruction("negate", instr.shape, [instr.operand(0)])
    return None
''')
    report = grade("algsimp_rule", solution)
    assert "not in the same computation" in messages(report, "integer-subtract-self")


# ---- fusion_decision ----------------------------------------------------------------------------------
def test_fusion_that_refuses_a_producer_reached_by_two_paths_is_caught(tmp_path: Path) -> None:
    # The over-cautious "cycle" rule: a copied producer cannot close a cycle.
    wrong = variant(tmp_path, "fusion_decision", (
        "            and not _duplicates_expensive_work(producer, consumer))",
        "            and not _duplicates_expensive_work(producer, consumer)\n"
        "            and not any(producer in _upstream(op) for op in consumer.operands if op is not producer))\n\n\n"
        "def _upstream(instr):\n"
        "    seen, stack = [], list(instr.operands)\n"
        "    while stack:\n"
        "        node = stack.pop()\n"
        "        if all(node is not s for s in seen):\n"
        "            seen.append(node)\n"
        "            stack.extend(node.operands)\n"
        "    return seen"))
    report = grade("fusion_decision", wrong)
    assert check_points(report)["rule-by-rule"][0] < 6
    text = messages(report, "rule-by-rule")
    assert "rule: a cheap producer reached by two paths is copied, not refused" in text
    assert "should_fuse(n, s) returned False, expected True" in text


def test_fusion_that_duplicates_expensive_work_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "fusion_decision", ("    return bool(others) and producer.info.expensive",
                                                  "    return False"))
    report = grade("fusion_decision", wrong)
    assert {"rule-by-rule", "random-decisions"} <= failed_checks(report)
    assert "exponential is expensive and has other users" in messages(report, "rule-by-rule")


def test_fusion_that_fuses_everything_breaks_modules(tmp_path: Path) -> None:
    report = grade("fusion_decision", write(tmp_path, "always.py", "def should_fuse(p, c):\n    return True\n"))
    assert report.score == 0, report.text()


def test_fusion_answer_must_be_a_bool(tmp_path: Path) -> None:
    report = grade("fusion_decision", write(tmp_path, "none.py", "def should_fuse(p, c):\n    pass\n"))
    assert report.score == 0
    assert "must return True or False, but returned None" in messages(report, "rule-by-rule")


# ---- elemental_emitter ----------------------------------------------------------------------------------
NAIVE_SOFTPLUS = '''
from xla_teach.backends.llvm.math import emit_exp, emit_log1p
def emit_softplus(b, x):
    return emit_log1p(b, emit_exp(b, x))
'''


def test_textbook_softplus_overflows_and_is_told_why(tmp_path: Path) -> None:
    report = grade("elemental_emitter", write(tmp_path, "naive.py", NAIVE_SOFTPLUS))
    assert failed_checks(report) == {"large-positive-inputs"}
    text = messages(report, "large-positive-inputs")
    assert "softplus(89.0) = inf, expected 89.0" in text and "overflows" in text


def test_emitter_of_the_wrong_type_or_calling_missing_functions_scores_zero(tmp_path: Path) -> None:
    wrong_type = write(tmp_path, "double.py", "from llvmlite import ir\ndef emit_softplus(b, x):\n"
                       "    return b.fpext(x, ir.DoubleType()) if x.type == ir.FloatType() else b.fptrunc(x, "
                       "ir.FloatType())\n")
    report = grade("elemental_emitter", wrong_type)
    assert report.score == 0 and "returned a double for a float input" in messages(report, "compiles")
    missing = write(tmp_path, "missing.py", "from llvmlite import ir\ndef emit_softplus(b, x):\n"
                    "    fn = ir.Function(b.module, ir.FunctionType(x.type, [x.type]), name='no_such_fn')\n"
                    "    return b.call(fn, [x])\n")
    report = grade("elemental_emitter", missing)
    assert report.score == 0 and "calls `no_such_fn`, which does not exist" in messages(report, "compiles")


# ---- bisect ---------------------------------------------------------------------------------------------------
FIRST_CHANGED = '''
from xla_teach.passes.pass_base import PassOptions, PassRecorder
def find_broken_pass(module, pipeline, args):
    recorder = PassRecorder()
    pipeline.run(module, PassOptions(), recorder)
    changed = [r for r in recorder.records if r.changed]
    return changed[0].pass_name if changed else None
'''

OWN_BISECTION = '''
import numpy as np
from xla_teach.hlo.evaluator import evaluate_module
from xla_teach.hlo.text.parser import parse_hlo
from xla_teach.passes.pass_base import PassOptions, PassRecorder

def find_broken_pass(module, pipeline, args):
    want = evaluate_module(module, args)
    recorder = PassRecorder()
    pipeline.run(module.clone(), PassOptions(), recorder)
    stages = [r for r in recorder.records if r.changed]

    def good(k):
        got = evaluate_module(parse_hlo(stages[k].after), args)
        return all(np.allclose(g, w, rtol=1e-3, atol=1e-3) for g, w in zip(got, want))

    if not stages or good(len(stages) - 1):
        return None
    lo, hi = -1, len(stages) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if good(mid) else (lo, mid)
    return stages[hi].pass_name
'''


def test_naming_the_first_pass_that_changed_anything_is_wrong(tmp_path: Path) -> None:
    report = grade("bisect", write(tmp_path, "first.py", FIRST_CHANGED))
    assert report.score == 0
    assert "returned 'algsimp', but that is not the broken pass: the module still computes the right results" \
        in messages(report, "finds-the-broken-pass")


def test_a_hand_written_bisection_passes(tmp_path: Path) -> None:
    report = grade("bisect", write(tmp_path, "own.py", OWN_BISECTION))
    assert report.passed, report.text()


def test_naming_a_pipeline_is_not_an_answer(tmp_path: Path) -> None:
    report = grade("bisect", write(tmp_path, "pipe.py", "def find_broken_pass(m, p, a):\n    return 'simplification'\n"))
    assert "'simplification' is a pipeline: name the pass inside it" in messages(report, "finds-the-broken-pass")


def test_fusing_parameters_reports_the_wrong_decision_not_a_crash(tmp_path: Path) -> None:
    solution = write(tmp_path, "params.py", "def should_fuse(p, c):\n"
                     "    return p.opcode == 'parameter' or (p.opcode != 'dot' and c.opcode not in ('dot', 'tuple'))\n")
    report = grade("fusion_decision", solution)
    text = messages(report, "fusion-pass")
    assert "during the fusion pass" in text and "expected False (not fusing: parameters are inputs" in text


# ---- sharding ---------------------------------------------------------------------------------------------
def test_sharding_that_ignores_the_device_order_is_caught(tmp_path: Path) -> None:
    """Tile k on device k (reading the tiles in order, not the assignment): right for iota orders only."""
    wrong = variant(tmp_path, "sharding", ("        out[int(assignment[index])] = spans",
                                           "        out[int(np.ravel_multi_index(index, assignment.shape))] = spans"))
    report = grade("sharding", wrong)
    points = check_points(report)
    assert points["replicated-and-even-tiles"] == (4, 4) and points["device-order"][0] == 0, report.text()
    assert "device 1 holds" in messages(report, "device-order")


def test_sharding_with_floor_division_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "sharding", ("            length = -(-size // count)", "            length = size // count"))
    report = grade("sharding", wrong)
    assert check_points(report)["uneven-sizes"][0] < 3 and check_points(report)["device-order"] == (3, 3), report.text()


def test_reshard_that_compares_the_text_is_caught(tmp_path: Path) -> None:
    """Two spellings of one sharding ({replicated} and all four devices copies of one tile) need nothing."""
    wrong = variant(tmp_path, "sharding", ("    if before == after:\n        return \"none\"",
                                           "    if src.to_text() == dst.to_text():\n        return \"none\""))
    report = grade("sharding", wrong)
    assert check_points(report)["reshard"] == (9, 10), report.text()
    assert "the partitioner needs 'none'" in messages(report, "reshard")


# ---- read_dump --------------------------------------------------------------------------------------------
def test_read_dump_that_does_not_look_inside_fusions_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "read_dump", (
        '        if instr.opcode == "fusion" and _holds(instr.fused_computation, op_name, opcode):\n            return instr.name\n    return None',
        "    return None"))
    report = grade("read_dump", wrong)
    points = check_points(report)
    assert points["finds-the-fusion"][0] < points["finds-the-fusion"][1] and points["kernels"] == (5, 5), report.text()
    assert "runs in '" in messages(report, "finds-the-fusion")


def test_read_dump_that_counts_constants_as_kernels_is_caught(tmp_path: Path) -> None:
    wrong = variant(tmp_path, "read_dump", ('QUIET = ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")',
                                            'QUIET = ("parameter", "tuple", "get-tuple-element", "bitcast")'))
    report = grade("read_dump", wrong)
    assert check_points(report)["kernels"][0] < 5 and check_points(report)["stack-frames"] == (3, 3), report.text()
