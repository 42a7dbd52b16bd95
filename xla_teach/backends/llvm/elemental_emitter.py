"""The elemental emitter: "the value of instruction X at index i", as LLVM IR.

This is the heart of fusion code generation, in CPU and GPU backends alike. For
every HLO instruction it builds a *generator*: a function that, given an
output index, emits the IR computing that one element from its operands'
generators. Data-movement ops are pure index arithmetic (a transpose permutes
the index, a broadcast drops dimensions, a slice adds an offset), so a fused
chain ``transpose -> add -> exp`` becomes straight-line code with no
intermediate array in memory::

    exp_gen(i)  = exp(add_gen(i))
    add_gen(i)  = x.load(i) + transpose_gen(i)
    transpose_gen([i0, i1]) = y.load([i1, i0])

Values are cached per (instruction, index, basic block), so an instruction read
twice at the same index is computed once. Reductions, windows, dots and
convolutions emit inner loops (:mod:`elemental_windows`). Out-of-range reads
never happen: pad, concatenate and dynamic slices clamp before loading.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xla_teach.backends.llvm import elemental_ops as ops
from xla_teach.backends.llvm.ir_array import IrArray, IrIndex, delinearize, i64, linearize, row_major_linear
from xla_teach.backends.llvm.ir_types import I64, compute_type, const
from xla_teach.hlo.attributes import source_target_pairs
from xla_teach.hlo.ir import HloInstruction
from xla_teach.hlo.opcodes import OPCODES, OpKind
from xla_teach.hlo.shape import Shape

Generator = Callable[[IrIndex], ir.Value]
GeneratorMaker = Callable[["ElementalEmitter", HloInstruction], Generator]

# Opcode -> the function that makes its generator, filled by @generates (as the evaluator's
# @register): the methods below, every unary and binary opcode, and elemental_windows' loops.
GENERATORS: dict[str, GeneratorMaker] = {}


def generates(*opcodes: str) -> Callable[[GeneratorMaker], GeneratorMaker]:
    """Register ``make(emitter, instr) -> Generator`` for ``opcodes``."""
    def register(make: GeneratorMaker) -> GeneratorMaker:
        for opcode in opcodes:
            if opcode in GENERATORS:
                raise ValueError(f"two elemental generators for {opcode}")
            GENERATORS[opcode] = make
        return make
    return register


class ElementalEmitter:
    """Generators for the instructions of one computation (usually a fused one)."""

    def __init__(self, b: ir.IRBuilder, parameter_generators: dict[int, Generator],
                 reassociate: bool = False) -> None:
        """``parameter_generators`` maps a parameter's unique_id to its generator
        (normally an :class:`IrArray` load of a kernel argument). ``reassociate``
        lets float adds/multiplies be reordered (for reduction bodies)."""
        self.b = b
        self.reassociate = reassociate
        self._generators: dict[int, Generator] = dict(parameter_generators)
        self._cache: dict[tuple[int, int, int], tuple[IrIndex, ir.Block, ir.Value]] = {}

    # ---- public -----------------------------------------------------------------------
    def generator(self, instr: HloInstruction) -> Generator:
        gen = self._generators.get(instr.unique_id)
        if gen is None:
            raw = self._make_generator(instr)

            def cached(index: IrIndex, _raw: Generator = raw, _id: int = instr.unique_id) -> ir.Value:
                key = (_id, id(index), id(self.b.block))
                hit = self._cache.get(key)
                if hit is not None and hit[0] is index and hit[1] is self.b.block:
                    return hit[2]
                value = _raw(index)
                name_value(value, instr.name)
                self._cache[key] = (index, self.b.block, value)
                return value

            gen = self._generators[instr.unique_id] = cached
        return gen

    def value_at(self, instr: HloInstruction, index: IrIndex) -> ir.Value:
        return self.generator(instr)(index)

    def set_generator(self, instr: HloInstruction, generator: Generator) -> None:
        """Compute ``instr`` with ``generator`` from now on (a kernel that has already computed
        a value -- a row's reduction, say -- hands it to the rest of the expression this way)."""
        self._generators[instr.unique_id] = generator

    # ---- dispatch ---------------------------------------------------------------------
    def _make_generator(self, instr: HloInstruction) -> Generator:
        from xla_teach.backends.llvm import elemental_windows  # noqa: F401 - registers the looping generators

        make = GENERATORS.get(instr.opcode)
        if make is None:
            raise NotImplementedError(f"no elemental generator for {instr.opcode} ({instr.name})")
        return make(self, instr)

    def _operand_at(self, instr: HloInstruction, i: int, index: IrIndex) -> ir.Value:
        """Operand ``i`` at ``index`` (scalar operands ignore the index)."""
        operand = instr.operand(i)
        if operand.shape.rank == 0:
            return self.value_at(operand, IrIndex.scalar(operand.shape))
        if operand.shape.dimensions == index.shape.dimensions:
            same = index if operand.shape.minor_to_major() == index.shape.minor_to_major() else IrIndex(
                index.dims, operand.shape)
            return self.value_at(operand, same)
        raise AssertionError(f"{instr.name}: operand {i} has shape {operand.shape}, index is over {index.shape}")

    # ---- leaves -----------------------------------------------------------------------
    @generates("parameter")
    def _gen_parameter(self, instr: HloInstruction) -> Generator:
        raise KeyError(f"no generator was given for parameter {instr.name}")

    @generates("constant")
    def _gen_constant(self, instr: HloInstruction) -> Generator:
        ptype = instr.shape.element_type
        if instr.shape.rank == 0:
            value = instr.literal[()]
            return lambda index: const(ptype, value.item() if hasattr(value, "item") else value)
        array = constant_array(self.b.module, instr)
        return lambda index: array.load(self.b, IrIndex(index.dims, instr.shape, index.linear))

    @generates("iota")
    def _gen_iota(self, instr: HloInstruction) -> Generator:
        dim = int(instr.attrs["iota_dimension"])
        ptype = instr.shape.element_type

        def gen(index: IrIndex) -> ir.Value:
            from xla_teach.hlo.types import PrimitiveType

            return ops.emit_convert(self.b, index.dims[dim], PrimitiveType.S64, ptype)

        return gen

    # ---- elementwise ------------------------------------------------------------------
    def _gen_unary(self, instr: HloInstruction) -> Generator:
        ptype = instr.operand(0).shape.element_type
        return lambda index: ops.emit_unary(self.b, instr.opcode, self._operand_at(instr, 0, index), ptype)

    def _gen_binary(self, instr: HloInstruction) -> Generator:
        ptype = instr.operand(0).shape.element_type

        def gen(index: IrIndex) -> ir.Value:
            x = self._operand_at(instr, 0, index)
            y = self._operand_at(instr, 1, index)
            return ops.emit_binary(self.b, instr.opcode, x, y, ptype, reassociate=self.reassociate)

        return gen

    @generates("compare")
    def _gen_compare(self, instr: HloInstruction) -> Generator:
        ptype = instr.operand(0).shape.element_type
        direction, cmp_type = instr.attrs["direction"], instr.attrs.get("type")

        def gen(index: IrIndex) -> ir.Value:
            x, y = self._operand_at(instr, 0, index), self._operand_at(instr, 1, index)
            return ops.emit_compare(self.b, direction, cmp_type, x, y, ptype)

        return gen

    @generates("select")
    def _gen_select(self, instr: HloInstruction) -> Generator:
        def gen(index: IrIndex) -> ir.Value:
            pred = self._operand_at(instr, 0, index)
            on_true, on_false = self._operand_at(instr, 1, index), self._operand_at(instr, 2, index)
            return self.b.select(pred, on_true, on_false)

        return gen

    @generates("clamp")
    def _gen_clamp(self, instr: HloInstruction) -> Generator:
        ptype = instr.shape.element_type

        def gen(index: IrIndex) -> ir.Value:
            lo, x, hi = (self._operand_at(instr, i, index) for i in range(3))
            return ops.emit_clamp(self.b, lo, x, hi, ptype)

        return gen

    @generates("convert")
    def _gen_convert(self, instr: HloInstruction) -> Generator:
        src, dst = instr.operand(0).shape.element_type, instr.shape.element_type
        return lambda index: ops.emit_convert(self.b, self._operand_at(instr, 0, index), src, dst)

    @generates("reduce-precision")
    def _gen_reduce_precision(self, instr: HloInstruction) -> Generator:
        ptype = instr.shape.element_type
        e, m = int(instr.attrs["exponent_bits"]), int(instr.attrs["mantissa_bits"])
        return lambda index: ops.emit_reduce_precision(self.b, self._operand_at(instr, 0, index), ptype, e, m)

    @generates("copy", "opt-barrier")
    def _gen_copy(self, instr: HloInstruction) -> Generator:
        return lambda index: self._operand_at(instr, 0, index)


    @generates("partition-id", "replica-id")
    def _gen_partition_id(self, instr: HloInstruction) -> Generator:
        """A single device is partition 0 and replica 0."""
        return lambda index: const(instr.shape.element_type, 0)


    @generates("all-reduce")
    def _gen_all_reduce(self, instr: HloInstruction) -> Generator:
        """One replica (xla_teach runs single-device): reducing over the replica group {this one}
        leaves each operand unchanged."""
        if instr.shape.is_tuple:
            raise NotImplementedError(f"{instr.name}: a variadic all-reduce is emitted per operand")
        return lambda index: self._operand_at(instr, 0, index)

    @generates("all-gather", "reduce-scatter", "all-to-all")
    def _gen_all_gather(self, instr: HloInstruction) -> Generator:
        """One replica: gathering (scattering, exchanging) within a group that holds only this one
        leaves the operand as it is."""
        from xla_teach.hlo.evaluator.control import single_replica_problem

        problem = single_replica_problem(instr)
        if problem:
            raise NotImplementedError(problem)
        return lambda index: self._operand_at(instr, 0, index)

    @generates("collective-broadcast")
    def _gen_collective_broadcast(self, instr: HloInstruction) -> Generator:
        """One replica: it is the first of its group, and keeps its operand."""
        return lambda index: self._operand_at(instr, 0, index)

    @generates("collective-permute")
    def _gen_collective_permute(self, instr: HloInstruction) -> Generator:
        """One replica: it receives its own operand if a pair sends replica 0 to itself, else zeros
        (the interpreter's rule, :mod:`xla_teach.hlo.evaluator.control`)."""
        if (0, 0) in source_target_pairs(instr.attr("source_target_pairs")):
            return lambda index: self._operand_at(instr, 0, index)
        zero = zero_of(instr.shape)
        return lambda index: zero

    # ---- data movement: index arithmetic ------------------------------------------------
    @generates("broadcast")
    def _gen_broadcast(self, instr: HloInstruction) -> Generator:
        operand = instr.operand(0)
        dims = instr.dimensions
        return lambda index: self.value_at(operand, IrIndex(tuple(index.dims[d] for d in dims), operand.shape))

    @generates("reshape")
    def _gen_reshape(self, instr: HloInstruction) -> Generator:
        operand = instr.operand(0)

        def gen(index: IrIndex) -> ir.Value:
            if operand.shape.dimensions == instr.shape.dimensions:
                return self.value_at(operand, IrIndex(index.dims, operand.shape))
            linear = row_major_linear(self.b, index)
            source = delinearize(self.b, linear, operand.shape)
            if operand.shape.has_default_layout():
                source = IrIndex(source.dims, operand.shape, linear)
            return self.value_at(operand, source)

        return gen

    @generates("bitcast")
    def _gen_bitcast(self, instr: HloInstruction) -> Generator:
        """Same bytes, new shape/layout: map through the *physical* position. XLA's optimized HLO
        also bitcasts between element types of one width (``s32[] bitcast(f32[])`` in a sort
        comparator): the bits are then reinterpreted, as ``bitcast-convert`` does."""
        operand = instr.operand(0)
        src, dst = operand.shape.element_type, instr.shape.element_type
        if src is not dst and src.bit_width != dst.bit_width:
            raise NotImplementedError(f"{instr.name}: a bitcast from {src.value} to {dst.value} changes the "
                                      "element width (XLA's bitcasts keep it)")

        def gen(index: IrIndex) -> ir.Value:
            physical = linearize(self.b, index)
            value = self.value_at(operand, delinearize_physical(self.b, physical, operand.shape))
            return value if src is dst else ops.emit_bitcast_convert(self.b, value, src, dst)

        return gen

    @generates("transpose")
    def _gen_transpose(self, instr: HloInstruction) -> Generator:
        operand = instr.operand(0)
        perm = instr.dimensions

        def gen(index: IrIndex) -> ir.Value:
            source: list[ir.Value] = [i64(0)] * operand.shape.rank
            for k, p in enumerate(perm):
                source[p] = index.dims[k]
            return self.value_at(operand, IrIndex(tuple(source), operand.shape))

        return gen

    @generates("slice")
    def _gen_slice(self, instr: HloInstruction) -> Generator:
        operand = instr.operand(0)
        spec = instr.attrs["slice"]

        def gen(index: IrIndex) -> ir.Value:
            source = []
            for value, s in zip(index.dims, spec, strict=True):
                scaled = value if s.stride == 1 else self.b.mul(value, i64(s.stride))
                source.append(scaled if s.start == 0 else self.b.add(scaled, i64(s.start)))
            return self.value_at(operand, IrIndex(tuple(source), operand.shape))

        return gen

    @generates("reverse")
    def _gen_reverse(self, instr: HloInstruction) -> Generator:
        operand = instr.operand(0)
        dims = set(instr.dimensions)

        def gen(index: IrIndex) -> ir.Value:
            source = tuple(
                self.b.sub(i64(operand.shape.dimensions[d] - 1), v) if d in dims else v
                for d, v in enumerate(index.dims))
            return self.value_at(operand, IrIndex(source, operand.shape))

        return gen

    @generates("pad")
    def _gen_pad(self, instr: HloInstruction) -> Generator:
        operand, pad_value = instr.operand(0), instr.operand(1)
        config = instr.attrs["padding"]
        b = self.b

        def gen(index: IrIndex) -> ir.Value:
            if operand.shape.element_count() == 0:  # all padding: no element to load (not even a clamped one)
                return self.value_at(pad_value, IrIndex.scalar(pad_value.shape))
            inside = ir.Constant(ir.IntType(1), 1)
            source = []
            for d, (value, p) in enumerate(zip(index.dims, config, strict=True)):
                size = operand.shape.dimensions[d]
                shifted = b.sub(value, i64(p.low))
                step = p.interior + 1
                pos = shifted if step == 1 else b.sdiv(shifted, i64(step))
                ok = b.and_(b.icmp_signed(">=", shifted, i64(0)), b.icmp_signed("<", pos, i64(size)))
                if step != 1:
                    ok = b.and_(ok, b.icmp_signed("==", b.srem(shifted, i64(step)), i64(0)))
                inside = b.and_(inside, ok)
                source.append(clamp_index(b, pos, size))
            value = self.value_at(operand, IrIndex(tuple(source), operand.shape))
            return b.select(inside, value, self.value_at(pad_value, IrIndex.scalar(pad_value.shape)))

        return gen

    @generates("concatenate")
    def _gen_concatenate(self, instr: HloInstruction) -> Generator:
        """Each element comes from one operand. When the operands are loads, every one is read
        and a ``select`` keeps the right value (straight-line code that vectorizes); when some
        operand is an expression -- the four gate gradients of an LSTM, fused -- a branch on the
        position computes only the operand it falls in, not all of them."""
        dim = instr.dimensions[0]
        b = self.b
        owners = [op for op in instr.operands if op.shape.element_count() != 0]
        if len(owners) > 1 and any(op.opcode not in ("parameter", "constant") for op in owners):
            return self._concatenate_by_branches(instr)

        def gen(index: IrIndex) -> ir.Value:
            result = None
            offset = 0
            for operand in instr.operands:
                size = operand.shape.dimensions[dim]
                if operand.shape.element_count() == 0:  # owns no output position; a clamped load would
                    offset += size                      # still read past its (empty) buffer
                    continue
                local = b.sub(index.dims[dim], i64(offset))
                source = list(index.dims)
                source[dim] = clamp_index(b, local, size)
                value = self.value_at(operand, IrIndex(tuple(source), operand.shape))
                if result is None:
                    result = value
                else:
                    result = b.select(b.icmp_signed(">=", index.dims[dim], i64(offset)), value, result)
                offset += size
            assert result is not None
            return result

        return gen

    def _concatenate_by_branches(self, instr: HloInstruction) -> Generator:
        dim = instr.dimensions[0]
        b = self.b
        spans = []  # (operand, offset) of the operands that own output positions
        offset = 0
        for operand in instr.operands:
            if operand.shape.element_count() != 0:
                spans.append((operand, offset))
            offset += operand.shape.dimensions[dim]

        def gen(index: IrIndex) -> ir.Value:
            position = index.dims[dim]
            merge = b.append_basic_block(f"{instr.name}.merge")
            incoming = []
            for k, (operand, start) in enumerate(spans):
                last = k == len(spans) - 1
                if not last:
                    inside = b.append_basic_block(f"{instr.name}.part{k}")
                    after = b.append_basic_block(f"{instr.name}.after{k}")
                    end = start + operand.shape.dimensions[dim]
                    b.cbranch(b.icmp_signed("<", position, i64(end)), inside, after)
                    b.position_at_end(inside)
                source = list(index.dims)
                # clamped all the same: the last part also takes positions past the end, never read
                source[dim] = clamp_index(b, b.sub(position, i64(start)), operand.shape.dimensions[dim])
                value = self.value_at(operand, IrIndex(tuple(source), operand.shape))
                incoming.append((value, b.block))
                b.branch(merge)
                if not last:
                    b.position_at_end(after)
            b.position_at_end(merge)
            phi = b.phi(incoming[0][0].type)
            for value, block in incoming:
                phi.add_incoming(value, block)
            return phi

        return gen

    @generates("dynamic-slice")
    def _gen_dynamic_slice(self, instr: HloInstruction) -> Generator:
        operand = instr.operand(0)
        sizes = instr.attrs["dynamic_slice_sizes"]

        def gen(index: IrIndex) -> ir.Value:
            starts = self.clamped_starts(instr, 1, operand.shape, sizes)
            source = tuple(self.b.add(v, s) for v, s in zip(index.dims, starts, strict=True))
            return self.value_at(operand, IrIndex(source, operand.shape))

        return gen

    @generates("dynamic-update-slice")
    def _gen_dynamic_update_slice(self, instr: HloInstruction) -> Generator:
        operand, update = instr.operand(0), instr.operand(1)
        b = self.b

        def gen(index: IrIndex) -> ir.Value:
            if update.shape.element_count() == 0:  # nothing to write; never load from the empty update
                return self.value_at(operand, IrIndex(index.dims, operand.shape))
            starts = self.clamped_starts(instr, 2, operand.shape, update.shape.dimensions)
            inside = ir.Constant(ir.IntType(1), 1)
            local = []
            for v, s, size in zip(index.dims, starts, update.shape.dimensions, strict=True):
                rel = b.sub(v, s)
                inside = b.and_(inside, b.and_(b.icmp_signed(">=", rel, i64(0)), b.icmp_signed("<", rel, i64(size))))
                local.append(clamp_index(b, rel, size))
            new = self.value_at(update, IrIndex(tuple(local), update.shape))
            old = self.value_at(operand, IrIndex(index.dims, operand.shape))
            return b.select(inside, new, old)

        return gen

    def clamped_starts(self, instr: HloInstruction, first: int, shape: Shape, sizes: tuple[int, ...]) -> list[ir.Value]:
        """Start indices (operands ``first``...) clamped to ``[0, dim - size]`` as i64."""
        starts = []
        for d in range(shape.rank):
            operand = instr.operand(first + d)
            raw = self.value_at(operand, IrIndex.scalar(operand.shape))
            wide = widen_index(self.b, raw, operand.shape.element_type.is_signed_int)
            starts.append(clamp_range(self.b, wide, 0, shape.dimensions[d] - sizes[d]))
        return starts


# ---------------------------------------------------------------------------------------
# Small helpers shared with the kernel emitters
# ---------------------------------------------------------------------------------------
# Unsigned 64-bit indices saturate here (as the interpreter's ``to_index_array`` does): a u64 of
# 2^63 or more would otherwise read as a negative i64, and adding a window size to one near 2^63
# could wrap. XLA compares unsigned indices unsigned, which gives the same clamped result.
U64_INDEX_LIMIT = 1 << 62


def widen_index(b: ir.IRBuilder, value: ir.Value, signed: bool) -> ir.Value:
    """An integer index operand as i64 (sign- or zero-extended; huge unsigned values saturate)."""
    if value.type.width > 64:
        return b.trunc(value, I64)
    if value.type.width < 64:
        return b.sext(value, I64) if signed else b.zext(value, I64)
    if signed:
        return value
    limit = i64(U64_INDEX_LIMIT)
    return b.select(b.icmp_unsigned(">", value, limit), limit, value)


def clamp_range(b: ir.IRBuilder, value: ir.Value, lo: int, hi: int) -> ir.Value:
    """``min(max(value, lo), hi)`` on signed i64 (``hi < lo`` yields ``lo``)."""
    hi = max(hi, lo)
    value = b.select(b.icmp_signed("<", value, i64(lo)), i64(lo), value)
    return b.select(b.icmp_signed(">", value, i64(hi)), i64(hi), value)


def clamp_index(b: ir.IRBuilder, value: ir.Value, size: int) -> ir.Value:
    """A safe index into a dimension of ``size`` (for loads whose result may be discarded)."""
    return clamp_range(b, value, 0, max(size - 1, 0))


def delinearize_physical(b: ir.IRBuilder, linear: ir.Value, shape: Shape) -> IrIndex:
    """The logical index stored at physical position ``linear`` under ``shape``'s layout."""
    dims: list[ir.Value] = [i64(0)] * shape.rank
    remaining = linear
    order = list(shape.minor_to_major())
    for n, d in enumerate(order):
        size = shape.dimensions[d]
        if n == len(order) - 1:
            dims[d] = remaining
        elif size == 1:
            dims[d] = i64(0)
        else:
            dims[d] = b.urem(remaining, i64(size))
            remaining = b.udiv(remaining, i64(size))
    return IrIndex(tuple(dims), shape, linear)


# Every unary and binary opcode without a generator of its own: one generic generator each.
for _opcode, _info in OPCODES.items():
    if _info.kind is OpKind.UNARY:
        GENERATORS.setdefault(_opcode, ElementalEmitter._gen_unary)
    elif _info.kind is OpKind.BINARY:
        GENERATORS.setdefault(_opcode, ElementalEmitter._gen_binary)


def emittable_fusion(fusion: HloInstruction) -> bool:
    """Whether the kernels built on this emitter can compute ``fusion`` as written: a loop,
    input or output fusion of instructions that all have elemental generators. (A fusion made
    by another compiler -- XLA's scatter-rooted or kCustom fusions -- is defused instead.)"""
    from xla_teach.backends.llvm import elemental_windows  # noqa: F401 - registers the looping generators

    if fusion.fusion_kind not in ("kLoop", "kInput", "kOutput"):
        return False
    return all(i.opcode == "parameter" or (i.opcode in GENERATORS and (i.opcode != "fusion" or emittable_fusion(i)))
               for i in fusion.fused_computation.instructions)


def constant_array(module: ir.Module, instr: HloInstruction) -> IrArray:
    """An HLO array constant as a private global in the LLVM module."""
    from xla_teach.backends.llvm.ir_types import constant_global_array, storage_type

    name = f"constant.{instr.name}"
    if name in module.globals:
        return IrArray(module.globals[name], instr.shape, instr.name)
    etype = instr.shape.element_type
    storage = storage_type(etype)
    flat = instr.literal.reshape(-1)
    raw = flat.view(f"u{etype.byte_size}") if etype.is_float and etype.bit_width == 16 else flat
    if etype.is_float and etype.bit_width != 16:
        items = [ir.Constant(storage, float(v)) for v in raw]
    else:
        items = [ir.Constant(storage, int(v) & ((1 << storage.width) - 1)) for v in raw]
    return IrArray(constant_global_array(module, name, storage, items, align=64), instr.shape, instr.name)


def zero_of(ptype_shape: Shape) -> ir.Constant:
    return ir.Constant(compute_type(ptype_shape.element_type), 0)


def name_value(value: ir.Value, name: str) -> None:
    """Give an emitted value the name of the HLO instruction it computes (``%"multiply.17"``), so
    that the IR says which lines came from which instruction -- the explorer marks them. A value
    that already has a name (an operand's, passed through by a reshape) keeps it."""
    # llvmlite numbers a value made without a name (".59")
    if isinstance(value, ir.Instruction) and (not value.name or value.name.startswith(".")) and not isinstance(
            value.type, ir.VoidType):
        value.name = name
