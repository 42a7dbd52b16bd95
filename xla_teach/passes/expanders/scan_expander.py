"""Rewrite ``scan`` as a ``reduce-window`` or as a ``while`` loop (``scan-expander``).

``scan(inputs..., inits...)`` runs ``to_apply`` once per position ``i`` along ``dimensions={d}``
(``i = L-1`` down to ``0`` with ``is_reverse=true``) on each input's slice at ``i`` and the carries
(the last ``num_carries`` operands start them); ``to_apply`` returns ``(outputs..., new carries...)``
and the scan returns ``(the outputs stacked along d..., the final carries...)``. JAX 0.11 writes
``jnp.cumsum``, ``cumprod``, ``cummax``... this way; no backend has a kernel for it, so this pass
gives them one of two forms they run:

1. **A cumulative op** -- one input, one carry, and a body that returns ``(r, r)`` with
   ``r = op(x, c)`` or ``op(c, x)`` for an associative and commutative ``op`` (``add``,
   ``multiply``, ``maximum``, ``minimum``, ``and``, ``or``, ``xor``) -- is the ``reduce-window``
   older JAX versions wrote for ``cumsum``: element k of the output is op over a window that
   covers the whole dimension, padded with L - 1 initial values below (above for ``is_reverse``),
   so that it holds x[0..k] (x[k..L-1]) and padding; the CPU runs it in one pass per row
   (``backends/cpu/kernels/scan.py``). The final carry is the output's last element (the first
   when reversed): a ``slice`` and a ``reshape``. The init becomes the window's padding value when
   op(c, c) = c -- any c for maximum, minimum, and, or; 0 for add and xor, 1 for multiply --
   since then the padding changes nothing; any other init is combined in afterwards,
   ``op(broadcast(init), reduce-window)``, with op's identity as the padding. The window (and a
   backend's kernel for it) may group the steps differently from the scan's order: for a float
   ``add`` or ``multiply`` this form is taken only when the scan says ``is_associative=true``,
   as JAX's ``cumsum`` does; max, min and integers give the same result in any grouping.
2. **Every other scan** becomes a ``while`` loop over the state ``(s32 i, carries...,
   output buffers..., inputs...)``, the buffers starting as zeros: its body reads each input's
   slice at ``i`` (``L-1-i`` when reversed) with ``dynamic-slice`` + ``reshape``, runs
   ``to_apply`` (a ``call``, which ``call-inliner`` inlines next), and stores each output there
   with ``dynamic-update-slice``; its condition is ``i < L``. A scan of length 0 is its inits
   and empty outputs.

Before::

    region_0 {
      x_i = f32[2] parameter(0)
      carry = f32[2] parameter(1)
      sum = f32[2] add(x_i, carry)
      ROOT t = (f32[2], f32[2]) tuple(sum, sum)
    }

    ENTRY main {
      x = f32[2,4] parameter(0)
      zero = f32[] constant(0)
      init = f32[2] broadcast(zero), dimensions={}
      scan = (f32[2,4], f32[2]) scan(x, init), dimensions={1}, num_carries=1, is_associative=true, to_apply=region_0
      ROOT cumsum = f32[2,4] get-tuple-element(scan), index=0
    }

After::

    scan_add_f32 {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT add = f32[] add(a, b)
    }

    ENTRY main {
      x = f32[2,4] parameter(0)
      zero = f32[] constant(0)
      reduce-window = f32[2,4] reduce-window(x, zero), window={size=1x4 pad=0_0x3_0}, to_apply=scan_add_f32
      slice = f32[2,1] slice(reduce-window), slice={[0:2], [3:4]}
      reshape = f32[2] reshape(slice)
      scan = (f32[2,4], f32[2]) tuple(reduce-window, reshape)
      ROOT cumsum = f32[2,4] get-tuple-element(scan), index=0
    }

A loop, in outline, for ``s = (f32[4], f32[]) scan(x, c0), dimensions={0}, num_carries=1``::

    s.condition:  i < 4
    s.body:       x_i = reshape(dynamic-slice(x, i)), step = call(x_i, c), to_apply=...
                  out' = dynamic-update-slice(out, reshape(step.0), i), c' = step.1
                  -> (i + 1, c', out', x)
    ENTRY:        w = while((0, c0, zeros, x)); s = tuple(w.2, w.1)

What replaces the scan is laid out as the scan's result (and the loop state as its parts), with a
``copy`` where an init's layout differs: tuples and loop state are read in place, so a part in
another layout would be read as garbage. The ``to_apply`` computations that no instruction calls
any more are removed; one reducer is made per op and element type and shared by the module's
cumulative scans.
"""

from __future__ import annotations

import numpy as np

from xla_teach.hlo.attributes import SliceDim, Window, WindowDimension
from xla_teach.hlo.ir import HloComputation, HloInstruction, HloModule
from xla_teach.hlo.opcodes import opcodes_with
from xla_teach.hlo.shape import Shape
from xla_teach.hlo.types import PrimitiveType
from xla_teach.passes.pass_base import HloPass
from xla_teach.passes.rewrite_utils import (
    add_callee,
    add_constant,
    add_instruction,
    uniform_constant_value,
)

# A cumulative scan's op: the window reduces its elements in its own grouping, and a reducer's
# two parameters (accumulator, element) may come in either order.
CUMULATIVE_OPS = opcodes_with("associative") & opcodes_with("commutative")
# Ops whose results do not depend on the grouping, even in floating point (they pick an operand).
EXACT_IN_ANY_ORDER = frozenset({"maximum", "minimum"})


class ScanExpander(HloPass):
    name = "scan-expander"
    is_optimization = False  # code generation needs it: there is no scan kernel

    def run(self, module: HloModule) -> bool:
        reducers: dict[tuple[str, PrimitiveType], HloComputation] = {}
        bodies: list[HloComputation] = []
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                if instr.opcode != "scan":
                    continue
                bodies.append(instr.to_apply)
                op = cumulative_op(instr)
                if op is not None and self._may_regroup(instr, op) and _length(instr) > 0:
                    self._window(module, instr, op, reducers)
                else:
                    self._loop(module, instr)
        called = {id(c) for i in module.instructions() for c in i.called_computations()}
        for body in dict.fromkeys(bodies):
            if id(body) not in called and body in module.computations:
                module.remove_computation(body)
        return bool(bodies)

    def _may_regroup(self, scan: HloInstruction, op: str) -> bool:
        """Whether a reduce-window may stand for ``scan``: it groups the steps its own way."""
        etype = scan.operand(0).shape.element_type
        if scan.attr("is_associative") or not etype.is_float or op in EXACT_IN_ANY_ORDER:
            return True
        self.note(f"{scan.name}: a float {op} scan without is_associative=true keeps its order: a while loop")
        return False

    # ---- 1. a cumulative op: reduce-window ----------------------------------------------------
    def _window(self, module: HloModule, scan: HloInstruction, op: str,
                reducers: dict[tuple[str, PrimitiveType], HloComputation]) -> None:
        comp = scan.parent
        assert comp is not None
        x, init = scan.operands
        d, reverse, length = _dimension(scan), bool(scan.attr("is_reverse")), _length(scan)
        shape = x.shape
        etype = shape.element_type
        if (op, etype) not in reducers:
            reducers[(op, etype)] = _add_reducer(module, op, etype)
        value = uniform_constant_value(init)
        made: list[HloInstruction] = []
        if value is not None and _keeps_itself(op, value):
            padding_value = init.operand(0) if init.opcode == "broadcast" else init
            if padding_value.shape.rank != 0:  # an array constant of equal elements
                padding_value = add_constant(comp, value, etype, "init")
                made.append(padding_value)
            combine = None
        else:
            padding_value = add_constant(comp, identity(op, etype), etype, "identity")
            made.append(padding_value)
            combine = init
        window = Window(tuple(
            WindowDimension(length, padding_low=0 if reverse else length - 1, padding_high=length - 1 if reverse else 0)
            if k == d else WindowDimension(1) for k in range(shape.rank)))
        output, final = scan.shape.tuple_shapes  # with the layouts the scan's users read
        total = add_instruction(comp, "reduce-window", [x, padding_value],
                                {"window": window, "to_apply": reducers[(op, etype)]}, shape=output)
        made.append(total)
        if combine is not None:
            spread = add_instruction(comp, "broadcast", [combine], {"dimensions": _other_dimensions(shape.rank, d)},
                                     result_dims=shape.dimensions)
            total = add_instruction(comp, op, [spread, total], shape=output)
            made += [spread, total]
        last = 0 if reverse else length - 1
        piece = add_instruction(comp, "slice", [total], {"slice": tuple(
            SliceDim(last, last + 1) if k == d else SliceDim(0, n) for k, n in enumerate(shape.dimensions))})
        carry = add_instruction(comp, "reshape", [piece], shape=final)
        result = add_instruction(comp, "tuple", [total, carry])
        for new in (*made, piece, carry, result):
            new.metadata = scan.metadata
        how = "its init pads the window" if combine is None else f"its init {op}-ed in afterwards"
        self.note(f"{scan.name}: cumulative {op} along dimension {d}{' (reversed)' if reverse else ''} -> "
                  f"reduce-window of size {length}; {how}")
        name = scan.name
        comp.replace_instruction(scan, result).name = name

    # ---- 2. anything else: a while loop -------------------------------------------------------
    def _loop(self, module: HloModule, scan: HloInstruction) -> None:
        comp = scan.parent
        assert comp is not None
        carries = int(scan.attr("num_carries"))
        split = scan.operand_count - carries
        inputs, inits = list(scan.operands[:split]), list(scan.operands[split:])
        outputs = list(scan.shape.tuple_shapes[:len(scan.shape.tuple_shapes) - carries])
        length = _length(scan)
        made: list[HloInstruction] = []
        buffers = []
        for out in outputs:  # laid out as the scan's users read them
            zero = add_constant(comp, 0, out.element_type, "zero")
            buffers.append(add_instruction(comp, "broadcast", [zero], {"dimensions": ()}, shape=out))
            made += [zero, buffers[-1]]
        finals = [_laid_out(comp, init, shape) for init, shape in zip(inits, scan.shape.tuple_shapes[len(outputs):],
                                                                      strict=True)]
        made += [f for f, i in zip(finals, inits, strict=True) if f is not i]
        if length == 0:
            result = add_instruction(comp, "tuple", [*buffers, *finals])
            self.note(f"{scan.name}: no steps -> empty outputs and the initial carries")
        else:
            counter = add_constant(comp, 0, PrimitiveType.S32, "i")
            state = add_instruction(comp, "tuple", [counter, *finals, *buffers, *inputs])
            condition = add_callee(comp, _condition(scan.name, state.shape, length))
            body = add_callee(comp, _body(scan, state.shape, len(inputs), len(outputs)))
            loop = add_instruction(comp, "while", [state], {"condition": condition, "body": body})
            parts = [add_instruction(comp, "get-tuple-element", [loop], {"index": 1 + carries + m})
                     for m in range(len(outputs))]
            parts += [add_instruction(comp, "get-tuple-element", [loop], {"index": 1 + k}) for k in range(carries)]
            result = add_instruction(comp, "tuple", parts)
            made += [counter, state, loop, *parts]
            self.note(f"{scan.name}: {length} steps of {scan.to_apply.name} -> while loop "
                      f"{'counting down' if scan.attr('is_reverse') else 'counting up'}")
        for new in (*made, result):
            new.metadata = scan.metadata
        name = scan.name
        comp.replace_instruction(scan, result).name = name


def cumulative_op(scan: HloInstruction) -> str | None:
    """The op of a scan that is a cumulative reduction -- one input, one carry, ``to_apply`` exactly
    ``(r, r)`` with ``r = op(x, c)`` or ``op(c, x)`` elementwise, op associative and commutative --
    else None."""
    body = scan.to_apply
    if scan.attr("num_carries") != 1 or scan.operand_count != 2 or len(body.instructions) != 4:
        return None
    root = body.root
    params = body.parameter_instructions
    if root.opcode != "tuple" or root.operand_count != 2 or root.operand(0) is not root.operand(1):
        return None
    r = root.operand(0)
    if r.opcode not in CUMULATIVE_OPS or len(set(r.operands)) != 2 or set(r.operands) != set(params):
        return None
    if not (params[0].shape.compatible(params[1].shape) and r.shape.compatible(params[1].shape)):
        return None
    return r.opcode


def identity(op: str, etype: PrimitiveType) -> object:
    """The value ``e`` with ``op(e, x) = x`` for every ``x`` of ``etype``."""
    dtype = etype.dtype
    if op in ("add", "or", "xor"):
        return 0
    if op == "multiply":
        return 1
    if etype.is_pred:
        return {"maximum": False, "minimum": True, "and": True}[op]
    if etype.is_float:
        return {"maximum": -np.inf, "minimum": np.inf}[op]
    info = np.iinfo(dtype)
    return {"maximum": info.min, "minimum": info.max, "and": -1 if etype.is_signed_int else info.max}[op]


def _keeps_itself(op: str, value: object) -> bool:
    """``op(c, c) = c``: then c's padding cells change nothing in a window that holds an element."""
    if op in ("add", "xor"):
        return bool(value == 0)
    if op == "multiply":
        return bool(value == 1)
    return True  # maximum, minimum, and, or


def _dimension(scan: HloInstruction) -> int:
    return int(scan.attr("dimensions")[0])


def _length(scan: HloInstruction) -> int:
    """L, the number of steps: the inputs' length along the scan dimension (or the outputs')."""
    d = _dimension(scan)
    first = scan.operand(0).shape if scan.operand_count > int(scan.attr("num_carries")) else scan.shape.tuple_shapes[0]
    return first.dimensions[d]


def _other_dimensions(rank: int, d: int) -> tuple[int, ...]:
    return tuple(k for k in range(rank) if k != d)


def _add_reducer(module: HloModule, op: str, etype: PrimitiveType) -> HloComputation:
    reducer = HloComputation(f"scan_{op}_{etype.value}")
    scalar = Shape.scalar(etype)
    a, b = reducer.add_parameter(scalar, "a"), reducer.add_parameter(scalar, "b")
    reducer.root_instruction = add_instruction(reducer, op, [a, b])
    module.add_computation(reducer)
    module.computations.remove(reducer)  # callees first: before every computation that may use it
    module.computations.insert(0, reducer)
    return reducer


def _condition(name: str, state: Shape, length: int) -> HloComputation:
    """``state.0 < length``."""
    cond = HloComputation(f"{name}.condition")
    param = cond.add_parameter(state, "state")
    i = add_instruction(cond, "get-tuple-element", [param], {"index": 0}, name="i")
    limit = add_constant(cond, length, PrimitiveType.S32, "length")
    cond.root_instruction = add_instruction(cond, "compare", [i, limit], {"direction": "LT"}, name="lt")
    return cond


def _body(scan: HloInstruction, state: Shape, inputs: int, outputs: int) -> HloComputation:
    """One step: the inputs' slices at the position, ``to_apply``, the outputs stored there."""
    d, carries = _dimension(scan), int(scan.attr("num_carries"))
    body = HloComputation(f"{scan.name}.body")
    param = body.add_parameter(state, "state")

    def element(index: int, name: str) -> HloInstruction:
        return add_instruction(body, "get-tuple-element", [param], {"index": index}, name=name)

    i = element(0, "i")
    carry = [element(1 + k, "carry") for k in range(carries)]
    buffers = [element(1 + carries + m, "output") for m in range(outputs)]
    xs = [element(1 + carries + outputs + j, "input") for j in range(inputs)]
    position = i
    if scan.attr("is_reverse"):
        last = add_constant(body, _length(scan) - 1, PrimitiveType.S32, "last")
        position = add_instruction(body, "subtract", [last, i], name="position")
    zero = add_constant(body, 0, PrimitiveType.S32, "zero")

    def starts(rank: int) -> list[HloInstruction]:
        return [position if k == d else zero for k in range(rank)]

    slices = []
    for x in xs:
        dims = x.shape.dimensions
        sizes = tuple(1 if k == d else n for k, n in enumerate(dims))
        piece = add_instruction(body, "dynamic-slice", [x, *starts(len(dims))], {"dynamic_slice_sizes": sizes})
        slices.append(add_instruction(body, "reshape", [piece], result_dims=dims[:d] + dims[d + 1:]))
    step = add_instruction(body, "call", [*slices, *carry], {"to_apply": scan.to_apply}, name="step")
    results = [add_instruction(body, "get-tuple-element", [step], {"index": k})
               for k in range(outputs + carries)]
    stored = []
    for buffer, value in zip(buffers, results[:outputs], strict=True):
        dims = value.shape.dimensions
        update = add_instruction(body, "reshape", [value], result_dims=dims[:d] + (1,) + dims[d:])
        stored.append(add_instruction(body, "dynamic-update-slice", [buffer, update, *starts(len(dims) + 1)],
                                      shape=buffer.shape))
    new_carries = [_laid_out(body, value, old.shape) for value, old in zip(results[outputs:], carry, strict=True)]
    one = add_constant(body, 1, PrimitiveType.S32, "one")
    following = add_instruction(body, "add", [i, one], name="next")
    body.root_instruction = add_instruction(body, "tuple", [following, *new_carries, *stored, *xs])
    return body


def _laid_out(comp: HloComputation, value: HloInstruction, shape: Shape) -> HloInstruction:
    """``value`` in ``shape``'s layout: itself, or a ``copy`` that transposes it in memory. The loop
    state and the scan's result are read in place, so each part must be laid out as its reader expects."""
    if value.shape == shape:
        return value
    return add_instruction(comp, "copy", [value], shape=shape)
