"""Helpers shared by the shape-inference tests: tiny called computations and
one-line ``infer`` / ``error`` wrappers working on shape text."""

from __future__ import annotations

import pytest

from xla_teach.hlo.attributes import Window
from xla_teach.hlo.errors import ShapeError
from xla_teach.hlo.ir import HloComputation
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.shape_inference import infer_shape
from xla_teach.hlo.text.parser import parse_hlo, parse_shape

# Small computations the rules check signatures of.
_COMPUTATIONS = parse_hlo("""
HloModule helpers

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

add_three {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] parameter(2)
  ROOT r = f32[] add(a, b)
}

add_to_s32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = s32[] convert(a)
}

argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  keep = pred[] compare(v0, v1), direction=GE
  v = f32[] select(keep, v0, v1)
  i = s32[] select(keep, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}

ge_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}

lt_pairs {
  a0 = f32[] parameter(0)
  b0 = f32[] parameter(1)
  a1 = s32[] parameter(2)
  b1 = s32[] parameter(3)
  ROOT r = pred[] compare(a0, b0), direction=LT
}

double {
  x = f32[3] parameter(0)
  ROOT r = f32[3] add(x, x)
}

negate_s {
  x = f32[] parameter(0)
  ROOT r = f32[] negate(x)
}

cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[3] get-tuple-element(s), index=1
  ROOT t = (s32[], f32[3]) tuple(i, v)
}

bad_body {
  s = (s32[], f32[3]) parameter(0)
  ROOT v = f32[3] get-tuple-element(s), index=1
}

to_s32 {
  x = f32[3] parameter(0)
  ROOT r = s32[3] convert(x)
}

ENTRY main {
  ROOT p = f32[] parameter(0)
}
""")


def comp(name: str) -> HloComputation:
    return _COMPUTATIONS.computation(name)


def S(text: str) -> Shape:
    return parse_shape(text)


def infer(opcode: str, shapes: list[str], attrs: dict | None = None, **kwargs: object) -> str:
    """Inferred shape as text without layouts, for compact assertions."""
    result = infer_shape(opcode, [S(s) for s in shapes], attrs or {}, **kwargs)
    return result.to_text(print_layout=False)


def error(opcode: str, shapes: list[str], attrs: dict | None = None, **kwargs: object) -> str:
    with pytest.raises(ShapeError) as info:
        infer_shape(opcode, [S(s) for s in shapes], attrs or {}, **kwargs)
    message = str(info.value)
    assert message.startswith(opcode + ":"), message
    return message


def window(text: str) -> Window:
    fields = dict(item.split("=") for item in text.split())
    return Window.from_fields(fields)
