"""transpose-folding: golden before/after texts, each also checked on the interpreter."""

from tests.passes.pass_test_utils import check_pass
from xla_teach.passes.simplifiers.transpose_folding import TransposeFolding


def test_folds_lhs_transpose() -> None:
    check_pass(TransposeFolding(), """
HloModule m
ENTRY main {
  a = f32[8,4] parameter(0)
  b = f32[8,6] parameter(1)
  at = f32[4,8] transpose(a), dimensions={1,0}
  ROOT d = f32[4,6] dot(at, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""", """
HloModule m
ENTRY main {
  a = f32[8,4] parameter(0)
  b = f32[8,6] parameter(1)
  ROOT dot = f32[4,6] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
""")


def test_folds_rhs_transpose() -> None:
    check_pass(TransposeFolding(), """
HloModule m
ENTRY main {
  a = f32[4,8] parameter(0)
  b = f32[6,8] parameter(1)
  bt = f32[8,6] transpose(b), dimensions={1,0}
  ROOT d = f32[4,6] dot(a, bt), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""", """
HloModule m
ENTRY main {
  a = f32[4,8] parameter(0)
  b = f32[6,8] parameter(1)
  ROOT dot = f32[4,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}
""")


def test_folds_both_sides_with_batch_dimensions() -> None:
    check_pass(TransposeFolding(), """
HloModule m
ENTRY main {
  a = f32[2,3,8] parameter(0)
  b = f32[8,2,5] parameter(1)
  at = f32[3,2,8] transpose(a), dimensions={1,0,2}
  bt = f32[2,8,5] transpose(b), dimensions={1,0,2}
  ROOT d = f32[2,3,5] dot(at, bt), lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
""", """
HloModule m
ENTRY main {
  a = f32[2,3,8] parameter(0)
  b = f32[8,2,5] parameter(1)
  ROOT dot = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={0}
}
""")


def test_keeps_a_transpose_that_reorders_free_dimensions() -> None:
    check_pass(TransposeFolding(), """
HloModule m
ENTRY main {
  a = f32[3,4,8] parameter(0)
  b = f32[8,5] parameter(1)
  at = f32[4,3,8] transpose(a), dimensions={1,0,2}
  ROOT d = f32[4,3,5] dot(at, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}
}
""", None)
