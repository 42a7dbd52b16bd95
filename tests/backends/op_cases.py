"""Small HLO modules exercising every opcode and fusion pattern, shared by the backend tests.

Each case is ``(id, hlo_text)``; the tests run it with fake arguments
(:func:`xla_teach.tools.bugs.fake_data.fake_arguments`) on a backend and on the reference
interpreter and compare. The CPU tests execute them; the GPU tests assemble their PTX
with ptxas everywhere and execute them where a device is present.
"""

from __future__ import annotations

FLOAT_TYPES = ["f16", "bf16", "f32", "f64"]
INT_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]
FLOAT_UNARY = ["abs", "negate", "exponential", "exponential-minus-one", "log", "log-plus-one", "sqrt", "rsqrt",
               "cbrt", "tanh", "logistic", "sine", "cosine", "tan", "floor", "ceil", "round-nearest-afz",
               "round-nearest-even", "sign", "erf"]
INT_UNARY = ["negate", "not", "popcnt", "count-leading-zeros"]
FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2"]
INT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or", "xor",
              "shift-left", "shift-right-logical", "shift-right-arithmetic"]
DIRECTIONS = ["EQ", "NE", "LT", "LE", "GT", "GE"]

ADD = {t: f"add_{t} {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT r = {t}[] add(a, b) }}"
       for t in FLOAT_TYPES + INT_TYPES}
MAX_F32 = "max_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }"


def _module(name: str, body: str, comps: str = "") -> str:
    return f"HloModule {name}\n{comps}\nENTRY main {{\n{body}\n}}\n"


def elementwise_cases() -> list[tuple[str, str]]:
    cases = []
    for t in FLOAT_TYPES:
        # Odd size (17) and a chain so fusion builds one loop kernel per type.
        lines = [f"  x = {t}[3,17] parameter(0)", f"  y = {t}[3,17] parameter(1)"]
        outs = []
        for i, op in enumerate(FLOAT_UNARY):
            lines.append(f"  u{i} = {t}[3,17] {op}(x)")
            outs.append(f"u{i}")
        for i, op in enumerate(FLOAT_BINARY):
            lines.append(f"  b{i} = {t}[3,17] {op}(x, y)")
            outs.append(f"b{i}")
        lines.append("  fin = pred[3,17] is-finite(b3)")
        outs.append("fin")
        for i, d in enumerate(DIRECTIONS):
            lines.append(f"  c{i} = pred[3,17] compare(x, y), direction={d}")
            outs.append(f"c{i}")
        shapes = ", ".join(f"{t}[3,17]" if o[0] in "ub" else "pred[3,17]" for o in outs)
        lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(outs)})")
        cases.append((f"elementwise_{t}", _module(f"elementwise_{t}", "\n".join(lines))))
    for t in INT_TYPES:
        lines = [f"  x = {t}[21] parameter(0)", f"  y = {t}[21] parameter(1)", f"  k = {t}[] constant(3)",
                 f"  kb = {t}[21] broadcast(k), dimensions={{}}", f"  xs = {t}[21] subtract(x, kb)"]
        outs = []
        for i, op in enumerate(INT_UNARY + (["abs", "sign"] if t.startswith("s") else [])):
            lines.append(f"  u{i} = {t}[21] {op}(xs)")
            outs.append(f"u{i}")
        for i, op in enumerate(INT_BINARY):
            lines.append(f"  b{i} = {t}[21] {op}(xs, y)")
            outs.append(f"b{i}")
        for i, d in enumerate(DIRECTIONS):
            lines.append(f"  c{i} = pred[21] compare(xs, y), direction={d}")
            outs.append(f"c{i}")
        shapes = ", ".join(f"{t}[21]" if o[0] in "ub" else "pred[21]" for o in outs)
        lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(outs)})")
        cases.append((f"elementwise_{t}", _module(f"elementwise_{t}", "\n".join(lines))))
    cases.append(("pred_logic", _module("pred_logic", """  a = pred[9] parameter(0)
  b = pred[9] parameter(1)
  n = pred[9] not(a)
  x = pred[9] xor(a, b)
  o = pred[9] or(n, b)
  c = pred[9] and(x, o)
  e = pred[9] compare(a, b), direction=EQ
  ROOT t = (pred[9], pred[9], pred[9]) tuple(c, e, x)""")))
    # Huge trig arguments (Payne-Hanek reduction): fake data scaled up to the top of the range.
    for t, scales in (("f32", "1e30, -3e37, 1e20, 7e10, 2e5, 1e38, -5e25, 1e15"),
                      ("f64", "1e300, -3e250, 1e100, 7e40, 2e9, 1e308, -5e150, 1e20")):
        cases.append((f"trig_huge_{t}", _module(f"trig_huge_{t}", f"""  x = {t}[8] parameter(0)
  scale = {t}[8] constant({{{scales}}})
  y = {t}[8] multiply(x, scale)
  s = {t}[8] sine(y)
  c = {t}[8] cosine(y)
  n = {t}[8] tan(y)
  ROOT out = ({t}[8], {t}[8], {t}[8]) tuple(s, c, n)""")))
    return cases


def conversion_cases() -> list[tuple[str, str]]:
    pairs = [("f32", "s8"), ("f32", "u8"), ("f32", "s32"), ("f32", "u32"), ("f32", "s64"), ("f32", "f16"),
             ("f32", "bf16"), ("f32", "f64"), ("f64", "f32"), ("f16", "f32"), ("bf16", "f32"), ("f16", "bf16"),
             ("s32", "f32"), ("u32", "f32"), ("s64", "f64"), ("u8", "s8"), ("s8", "u32"), ("s32", "pred"),
             ("pred", "f32"), ("f32", "pred"), ("u64", "f32"), ("s16", "f16")]
    cases = []
    for src, dst in pairs:
        body = f"""  x = {src}[2,13] parameter(0)
  k = {src}[] constant(7)
  kb = {src}[2,13] broadcast(k), dimensions={{}}
  s = {src}[2,13] multiply(x, kb)
  ROOT c = {dst}[2,13] convert(s)""" if src != "pred" else f"""  x = {src}[2,13] parameter(0)
  ROOT c = {dst}[2,13] convert(x)"""
        cases.append((f"convert_{src}_{dst}", _module(f"convert_{src}_{dst}", body)))
    cases.append(("bitcast_convert", _module("bitcast_convert", """  x = f32[5,4] parameter(0)
  i = s32[5,4] bitcast-convert(x)
  u = u32[5,4] bitcast-convert(x)
  h = u16[5,4,2] bitcast-convert(x)
  d = f64[5,2] parameter(1)
  w = s64[5,2] bitcast-convert(d)
  ROOT t = (s32[5,4], u32[5,4], u16[5,4,2], s64[5,2]) tuple(i, u, h, w)""")))
    cases.append(("reduce_precision", _module("reduce_precision", """  x = f32[33] parameter(0)
  ROOT r = f32[33] reduce-precision(x), exponent_bits=5, mantissa_bits=10""")))
    return cases


def data_movement_cases() -> list[tuple[str, str]]:
    return [
        ("broadcast_reshape_transpose", _module("brt", """  x = f32[3,5] parameter(0)
  b = f32[2,3,5,4] broadcast(x), dimensions={1,2}
  t = f32[4,5,2,3] transpose(b), dimensions={3,2,0,1}
  r = f32[20,6] reshape(t)
  e = f32[20,6] exponential(r)
  ROOT o = f32[6,20] transpose(e), dimensions={1,0}""")),
        ("transpose_tiled_f32", _module("tt", """  x = f32[67,45] parameter(0)
  e = f32[67,45] multiply(x, x)
  ROOT t = f32[45,67] transpose(e), dimensions={1,0}""")),
        ("transpose_tiled_3d_f16", _module("tt3", """  x = f16[3,40,33] parameter(0)
  ROOT t = f16[33,3,40] transpose(x), dimensions={2,0,1}""")),
        ("layout_copy", _module("layout_copy", """  x = f32[19,23]{1,0} parameter(0)
  ROOT c = f32[19,23]{0,1} copy(x)""")),
        ("slice_pad_concat_reverse", _module("spcr", """  x = f32[10,9] parameter(0)
  s = f32[4,3] slice(x), slice={[1:9:2], [0:9:3]}
  z = f32[] constant(-1)
  p = f32[8,3] pad(s, z), padding=2_-1_1x1_-1_0
  r = f32[8,3] reverse(p), dimensions={0,1}
  y = f32[8,2] parameter(1)
  ROOT c = f32[8,5] concatenate(r, y), dimensions={1}""")),
        ("iota_dynamic_slice", _module("ids", """  x = s32[12,8] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  d = s32[5,3] dynamic-slice(x, i, j), dynamic_slice_sizes={5,3}
  io = s32[5,3] iota(), iota_dimension=1
  ROOT a = s32[5,3] add(d, io)""")),
        ("dynamic_update_slice", _module("dus", """  x = f32[12,8] parameter(0)
  u = f32[4,5] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT d = f32[12,8] dynamic-update-slice(x, u, i, j)""")),
        ("bitcast_copy_barrier", _module("bcb", """  x = f32[4,6] parameter(0)
  b = f32[24] bitcast(x)
  c = f32[24] copy(b)
  t = (f32[24], f32[4,6]) tuple(c, x)
  o = (f32[24], f32[4,6]) opt-barrier(t)
  g = f32[24] get-tuple-element(o), index=0
  ROOT n = f32[24] negate(g)""")),
        ("empty_and_scalar", _module("empty", """  x = f32[0,5] parameter(0)
  s = f32[] parameter(1)
  e = f32[0,5] exponential(x)
  z = f32[] constant(0)
  r = f32[5] reduce(x, z), dimensions={0}, to_apply=add_f32
  m = f32[] multiply(s, s)
  ROOT t = (f32[0,5], f32[5], f32[]) tuple(e, r, m)""", ADD["f32"])),
    ]


def reduction_cases() -> list[tuple[str, str]]:
    cases = []
    for t in ["f32", "f64", "f16", "bf16", "s32", "u8", "s64"]:
        cases.append((f"reduce_rows_{t}", _module(f"rr_{t}", f"""  x = {t}[37,129] parameter(0)
  z = {t}[] constant(0)
  ROOT r = {t}[37] reduce(x, z), dimensions={{1}}, to_apply=add_{t}""", ADD[t])))
    cases += [
        ("reduce_columns", _module("rc", """  x = f32[300,7] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[7] reduce(x, z), dimensions={0}, to_apply=add_f32""", ADD["f32"])),
        ("reduce_columns_3d_f16_max", _module("rc3", """  x = f16[40,3,700] parameter(0)
  e = f16[40,3,700] exponential(x)
  z = f16[] constant(-inf)
  ROOT r = f16[3,700] reduce(e, z), dimensions={0}, to_apply=max_f16""",
                                                    "max_f16 { a = f16[] parameter(0)  b = f16[] parameter(1)  "
                                                    "ROOT r = f16[] maximum(a, b) }")),
        ("reduce_all_long", _module("ra", """  x = f32[5000,41] parameter(0)
  y = f32[5000,41] parameter(1)
  m = f32[5000,41] multiply(x, y)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(m, z), dimensions={0,1}, to_apply=add_f32""", ADD["f32"])),
        ("reduce_middle_max", _module("rm", """  x = f32[6,50,9] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[6,9] reduce(x, z), dimensions={1}, to_apply=max_f32""", MAX_F32)),
        ("softmax_multi_output", _module("softmax", """  x = f32[8,100] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max_f32
  mb = f32[8,100] broadcast(mx), dimensions={0}
  s = f32[8,100] subtract(x, mb)
  e = f32[8,100] exponential(s)
  z = f32[] constant(0)
  sm = f32[8] reduce(e, z), dimensions={1}, to_apply=add_f32
  sb = f32[8,100] broadcast(sm), dimensions={0}
  ROOT d = f32[8,100] divide(e, sb)""", ADD["f32"] + "\n" + MAX_F32)),
        ("variadic_argmax", _module("argmax", """  x = f32[6,31] parameter(0)
  i = s32[6,31] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[6], s32[6]) reduce(x, i, ninf, zero), dimensions={1}, to_apply=argmax""",
                                             """argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, av, bv)
  j = s32[] select(pick, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, j)
}""")),
        ("reduce_window_max_pool", _module("rw", """  x = f32[2,9,9,3] parameter(0)
  ninf = f32[] constant(-inf)
  ROOT r = f32[2,5,5,3] reduce-window(x, ninf), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=max_f32""",
                                               MAX_F32)),
        ("reduce_window_dilated_sum", _module("rwd", """  x = f32[11,7] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,7] reduce-window(x, z), window={size=3x2 stride=2x1 pad=0_1x1_0 lhs_dilate=1x1 rhs_dilate=2x1}, to_apply=add_f32""",
                                                  ADD["f32"])),
        ("select_and_scatter", _module("sas", """  x = f32[4,6] parameter(0)
  s = f32[2,3] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[4,6] select-and-scatter(x, s, z), window={size=2x2 stride=2x2}, select=ge, scatter=add_f32""",
                                         ADD["f32"] + """
ge { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = pred[] compare(a, b), direction=GE }""")),
    ]
    return cases


def contraction_cases() -> list[tuple[str, str]]:
    return [
        ("dot_matvec", _module("mv", """  a = f32[33,17] parameter(0)
  v = f32[17] parameter(1)
  ROOT d = f32[33] dot(a, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}""")),
        ("dot_matmul_bias_relu", _module("mm", """  a = f32[40,24] parameter(0)
  b = f32[24,36] parameter(1)
  c = f32[36] parameter(2)
  d = f32[40,36] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  cb = f32[40,36] broadcast(c), dimensions={1}
  s = f32[40,36] add(d, cb)
  z = f32[] constant(0)
  zb = f32[40,36] broadcast(z), dimensions={}
  ROOT r = f32[40,36] maximum(s, zb)""")),
        # Regression: a transpose after the epilogue must not be fused into the dot's output fusion.
        ("dot_epilogue_then_transpose", _module("dtt", """  g = f32[64,10] parameter(0)
  x = f32[64,78] parameter(1)
  w = f32[78,10] parameter(2)
  d = f32[10,78] dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  k = f32[] constant(0.1)
  kb = f32[10,78] broadcast(k), dimensions={}
  m = f32[10,78] multiply(kb, d)
  t = f32[78,10] transpose(m), dimensions={1,0}
  ROOT s = f32[78,10] subtract(w, t)""")),
        ("dot_large_blas", _module("big", """  a = f32[256,300] parameter(0)
  b = f32[300,200] parameter(1)
  ROOT d = f32[256,200] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""")),
        ("dot_batch_transposed", _module("bmm", """  a = f32[3,20,9] parameter(0)
  b = f32[3,11,9] parameter(1)
  ROOT d = f32[3,20,11] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}""")),
        ("dot_f64_s32_f16", _module("dtypes", """  a = f64[5,6] parameter(0)
  b = f64[6,4] parameter(1)
  d = f64[5,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  i = s32[5,6] parameter(2)
  j = s32[6,4] parameter(3)
  k = s32[5,4] dot(i, j), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h = f16[5,6] parameter(4)
  g = f16[6,4] parameter(5)
  l = f16[5,4] dot(h, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f64[5,4], s32[5,4], f16[5,4]) tuple(d, k, l)""")),
        ("conv2d_nhwc", _module("conv", """  x = f32[2,9,8,3] parameter(0)
  w = f32[3,3,3,5] parameter(1)
  ROOT c = f32[2,5,4,5] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f""")),
        ("conv_grouped_dilated", _module("convg", """  x = f32[1,4,10,10] parameter(0)
  w = f32[6,2,3,3] parameter(1)
  ROOT c = f32[1,6,6,8] convolution(x, w), window={size=3x3 pad=0_0x1_1 rhs_dilate=2x2}, dim_labels=bf01_oi01->bf01, feature_group_count=2""")),
        ("conv_batch_group", _module("convbg", """  x = f32[4,5,5,2] parameter(0)
  w = f32[3,3,2,4] parameter(1)
  ROOT c = f32[1,3,3,4] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=4""")),
    ]


def indexing_cases() -> list[tuple[str, str]]:
    return [
        ("gather_rows", _module("gather", """  x = f32[10,6] parameter(0)
  i = s32[7] parameter(1)
  ROOT g = f32[7,6] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}""")),
        ("gather_2d_windows", _module("gather2", """  x = f32[9,9,2] parameter(0)
  i = s32[4,2] parameter(1)
  ROOT g = f32[4,3,3,2] gather(x, i), offset_dims={1,2,3}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={3,3,2}""")),
        ("scatter_add", _module("scatter", """  x = f32[10,4] parameter(0)
  i = s32[6,1] parameter(1)
  u = f32[6,4] parameter(2)
  ROOT s = f32[10,4] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32""",
                                        ADD["f32"])),
        ("sort_multi_operand_stable", _module("sort", """  k = f32[3,40] parameter(0)
  v = s32[3,40] iota(), iota_dimension=1
  ROOT s = (f32[3,40], s32[3,40]) sort(k, v), dimensions={1}, is_stable=true, to_apply=less""",
                                               """less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}""")),
        ("sort_s32_descending", _module("sortd", """  k = s32[2,3,25] parameter(0)
  ROOT s = s32[2,3,25] sort(k), dimensions={2}, to_apply=gt""",
                                         "gt { a = s32[] parameter(0)  b = s32[] parameter(1)  "
                                         "ROOT r = pred[] compare(a, b), direction=GT }")),
    ]


def control_flow_cases() -> list[tuple[str, str]]:
    return [
        ("while_loop", _module("while", """  x = f32[5] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[5]) tuple(zero, x)
  w = (s32[], f32[5]) while(t), condition=cond, body=body
  ROOT r = f32[5] get-tuple-element(w), index=1""", """cond {
  p = (s32[], f32[5]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[5]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[5] get-tuple-element(p), index=1
  h = f32[] constant(0.5)
  hb = f32[5] broadcast(h), dimensions={}
  m = f32[5] multiply(v, hb)
  c = f32[5] cosine(m)
  ROOT t = (s32[], f32[5]) tuple(j, c)
}""")),
        ("conditional_pred_and_index", _module("cond", """  p = pred[] parameter(0)
  x = f32[4] parameter(1)
  k = s32[] parameter(2)
  a = f32[4] conditional(p, x, x), true_computation=neg, false_computation=ex
  b = f32[4] conditional(k, x, x, x), branch_computations={neg, ex, ident}
  ROOT t = (f32[4], f32[4]) tuple(a, b)""", """neg { p = f32[4] parameter(0)  ROOT n = f32[4] negate(p) }
ex { p = f32[4] parameter(0)  ROOT e = f32[4] exponential(p) }
ident { ROOT p = f32[4] parameter(0) }""")),
        ("call_and_map", _module("callmap", """  x = f32[7] parameter(0)
  y = f32[7] parameter(1)
  c = f32[7] call(x, y), to_apply=fma
  ROOT m = f32[7] map(c, y), dimensions={0}, to_apply=mx""", """fma {
  a = f32[7] parameter(0)
  b = f32[7] parameter(1)
  m = f32[7] multiply(a, b)
  ROOT s = f32[7] add(m, a)
}
mx { a = f32[] parameter(0)  b = f32[] parameter(1)  s = f32[] sine(a)  ROOT r = f32[] maximum(s, b) }""")),
        ("rng_bit_generator", _module("rng", """  key = u64[2] parameter(0)
  ROOT r = (u64[2], u32[3,37]) rng-bit-generator(key), algorithm=rng_philox""")),
        ("custom_call_all_reduce_ids", _module("misc", """  x = f32[6] parameter(0)
  i = f32[6] custom-call(x), custom_call_target="xla_teach.identity"
  a = f32[6] all-reduce(i), replica_groups={}, to_apply=add_f32
  p = u32[] partition-id()
  r = u32[] replica-id()
  ROOT t = (f32[6], u32[], u32[]) tuple(a, p, r)""", ADD["f32"])),
    ]


def expanded_cases() -> list[tuple[str, str]]:
    """Ops with no kernel of their own: the expanders rewrite ``topk`` and ``rng`` first."""
    return [
        # Small integers (fake data draws [0, 8)) converted to floats: rows full of ties, which the
        # stable sort must break by position, as the interpreter does.
        ("topk_ties", _module("topk", """  xi = s32[4,33] parameter(0)
  x = f32[4,33] convert(xi)
  a = (f32[4,5], s32[4,5]) topk(x), k=5, largest=true
  y = s32[3,20] parameter(1)
  b = (s32[3,20], s32[3,20]) topk(y), k=20, largest=false
  h = bf16[7] parameter(2)
  c = (bf16[1], s32[1]) topk(h), k=1
  ROOT t = ((f32[4,5], s32[4,5]), (s32[3,20], s32[3,20]), (bf16[1], s32[1])) tuple(a, b, c)""")),
        # scan as JAX 0.11 writes cumsum (scan-expander: a reduce-window), and a scan whose body is
        # no cumulative op, reversed, with an output unlike its carry (scan-expander: a while loop).
        ("scan_cumsum_and_loop", _module("scan", """  x = f32[3,6] parameter(0)
  zero = f32[] constant(0)
  init = f32[3] broadcast(zero), dimensions={}
  cs = (f32[3,6], f32[3]) scan(x, init), dimensions={1}, num_carries=1, is_associative=true, to_apply=cumsum
  k = s32[6,2] parameter(1)
  c0 = s32[2] parameter(2)
  lp = (pred[6,2], s32[2]) scan(k, c0), dimensions={0}, num_carries=1, is_reverse=true, to_apply=affine
  ROOT t = ((f32[3,6], f32[3]), (pred[6,2], s32[2])) tuple(cs, lp)""", """cumsum {
  x_i = f32[3] parameter(0)
  carry = f32[3] parameter(1)
  s = f32[3] add(x_i, carry)
  ROOT t = (f32[3], f32[3]) tuple(s, s)
}
affine {
  a = s32[2] parameter(0)
  b = s32[2] parameter(1)
  a2 = s32[2] add(a, a)
  next = s32[2] subtract(a2, b)
  odd = pred[2] compare(next, b), direction=LT
  ROOT t = (pred[2], s32[2]) tuple(odd, next)
}""")),
        # Several rngs, one of them in a called computation: each draws from the counter where the
        # previous one stopped, in the order the interpreter runs them.
        ("rng_uniform_normal", _module("rng", """  lo = f32[] parameter(0)
  hi = f32[] parameter(1)
  u = f32[5,7] rng(lo, hi), distribution=rng_uniform
  a = s32[] parameter(2)
  b = s32[] parameter(3)
  i = s32[9] rng(a, b), distribution=rng_uniform
  m = f64[] parameter(4)
  s = f64[] parameter(5)
  n = f64[3,3] rng(m, s), distribution=rng_normal
  c = bf16[11] call(lo, hi), to_apply=draw
  ROOT t = (f32[5,7], s32[9], f64[3,3], bf16[11]) tuple(u, i, n, c)""", """draw {
  lo = f32[] parameter(0)
  hi = f32[] parameter(1)
  lb = bf16[] convert(lo)
  hb = bf16[] convert(hi)
  ROOT r = bf16[11] rng(lb, hb), distribution=rng_uniform
}""")),
        # The state the expanded rng reads, written by hand: ordered by a control edge, read again
        # inside a loop body (a fresh {key, counter} per iteration), feeding rng-bit-generator.
        ("rng_get_and_update_state", _module("rngstate", """  s1 = u64[2] rng-get-and-update-state(), delta=3
  s2 = u64[2] rng-get-and-update-state(), delta=18446744073709551615, control-predecessors={s1}
  g = (u64[2], u32[7]) rng-bit-generator(s2), algorithm=rng_philox
  bits = u32[7] get-tuple-element(g), index=1
  zero = s32[] constant(0)
  init = (s32[], u64[2]) tuple(zero, s1)
  w = (s32[], u64[2]) while(init), condition=three, body=step, control-predecessors={s2}
  last = u64[2] get-tuple-element(w), index=1
  ROOT t = (u64[2], u64[2], u32[7], u64[2]) tuple(s1, s2, bits, last)""", """three {
  p = (s32[], u64[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
step {
  p = (s32[], u64[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = u64[2] rng-get-and-update-state(), delta=2
  ROOT t = (s32[], u64[2]) tuple(j, s)
}""")),
    ]


def collective_cases() -> list[tuple[str, str]]:
    """Collectives with their one-replica meaning, plus the remaining special ops."""
    return [
        ("all_gather_collective_permute", _module("collectives", """  x = f32[6,4] parameter(0)
  g = f32[6,4] all-gather(x), dimensions={0}, replica_groups={}
  p = f32[6,4] collective-permute(x), source_target_pairs={{0,0}}
  y = s32[5] parameter(1)
  q = s32[5] collective-permute(y), source_target_pairs={{0,1},{1,0}}
  e = f32[6,4] exponential(g)
  ROOT t = (f32[6,4], f32[6,4], s32[5]) tuple(e, p, q)""")),
        ("reduce_scatter_all_to_all", _module("collectives_mesh", """  x = f32[6,4] parameter(0)
  n = f32[6,4] negate(x)
  r = f32[6,4] reduce-scatter(n), channel_id=1, replica_groups=mesh['x'=1] {'x'}, dimensions={0}, to_apply=add_f32
  a = f32[6,4] all-to-all(r), replica_groups={{0}}, dimensions={1}
  ROOT e = f32[6,4] exponential(a)""", ADD["f32"])),
        ("async_pairs_broadcast", _module("collectives_async", """  x = f32[6,4] parameter(0)
  rs = f32[6,4] all-reduce-start(x), replica_groups={}, to_apply=add_f32
  rd = f32[6,4] all-reduce-done(rs)
  gs = (f32[6,4], f32[6,4]) all-gather-start(rd), replica_groups={}, dimensions={0}
  gd = f32[6,4] all-gather-done(gs)
  ps = (f32[6,4], f32[6,4], u32[], u32[]) collective-permute-start(gd), source_target_pairs={{0,0}}
  pd = f32[6,4] collective-permute-done(ps)
  b = f32[6,4] collective-broadcast(pd), replica_groups={}
  ROOT e = f32[6,4] exponential(b)""", ADD["f32"])),
        ("clamp_after_all", _module("clamp", """  x = f32[13] parameter(0)
  lo = f32[] constant(-0.5)
  hi = f32[] constant(0.75)
  c = f32[13] clamp(lo, x, hi)
  i = s32[13] parameter(1)
  l = s32[13] constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
  h = s32[] constant(5)
  d = s32[13] clamp(l, i, h)
  tok = token[] after-all()
  b = (f32[13], token[]) tuple(c, tok)
  o = (f32[13], token[]) opt-barrier(b)
  g = f32[13] get-tuple-element(o), index=0
  ROOT t = (f32[13], s32[13]) tuple(g, d)""")),
    ]


def parallel_kernel_cases() -> list[tuple[str, str]]:
    """Sorts, scatters, dynamic-update-slices and rng-bit-generators at sizes and types that take
    each path of the GPU's parallel kernels: a sort in shared memory and one too long for it, ties
    (fake integers lie in [0, 8)), colliding scatter updates for every atomic flavour, in-place and
    copying dynamic-update-slice, and Philox streams of every width."""
    lt = {t: f"lt_{t} {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT r = pred[] compare(a, b), direction=LT }}"
          for t in ("u8", "f32")}
    less_kv = """less_kv {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}"""
    less_f16 = """less_f16 {
  a = f16[] parameter(0)
  b = f16[] parameter(1)
  c = bf16[] parameter(2)
  d = bf16[] parameter(3)
  ROOT gt = pred[] compare(a, b), direction=GT, type=TOTALORDER
}"""
    combiners = "\n".join([
        ADD["f32"], ADD["f16"], ADD["s64"], ADD["bf16"],
        "max_s32 { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] maximum(a, b) }",
        "min_u32 { a = u32[] parameter(0)  b = u32[] parameter(1)  ROOT r = u32[] minimum(a, b) }",
        MAX_F32,
        "mul_u8 { a = u8[] parameter(0)  b = u8[] parameter(1)  ROOT r = u8[] multiply(a, b) }",
        "or_pred { a = pred[] parameter(0)  b = pred[] parameter(1)  ROOT r = pred[] or(a, b) }",
        "sub_first_f64 { a = f64[] parameter(0)  b = f64[] parameter(1)  c = f64[] constant(0.5)  "
        "m = f64[] multiply(b, c)  ROOT r = f64[] add(a, m) }",
    ])

    def scatter(name: str, t: str, combiner: str, rows: int = 6, updates: int = 40) -> str:
        return (f"  x{name} = {t}[{rows},3] parameter({len(name_order)})\n"
                f"  i{name} = s32[{updates},1] parameter({len(name_order) + 1})\n"
                f"  u{name} = {t}[{updates},3] parameter({len(name_order) + 2})\n"
                f"  s{name} = {t}[{rows},3] scatter(x{name}, i{name}, u{name}), update_window_dims={{1}}, "
                f"inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, "
                f"to_apply={combiner}")

    name_order: list[str] = []
    lines = []
    for name, t, combiner in [("a", "f32", "add_f32"), ("b", "f16", "add_f16"), ("c", "s64", "add_s64"),
                              ("d", "s32", "max_s32"), ("e", "u32", "min_u32"), ("f", "f32", "max_f32"),
                              ("g", "u8", "mul_u8"), ("h", "pred", "or_pred"), ("k", "bf16", "add_bf16"),
                              ("m", "f64", "sub_first_f64")]:
        lines.append(scatter(name, t, combiner))
        name_order += [f"x{name}", f"i{name}", f"u{name}"]
    outputs = ", ".join(f"s{n}" for n in "abcdefghkm")
    types = ", ".join(f"{t}[6,3]" for t in ["f32", "f16", "s64", "s32", "u32", "f32", "u8", "pred", "bf16",
                                            "f64"])
    return [
        ("sort_long_rows_in_global_memory", _module("sortlong", """  xi = s32[3,5000] parameter(0)
  k = f32[3,5000] convert(xi)
  v = s32[3,5000] iota(), iota_dimension=1
  ROOT s = (f32[3,5000], s32[3,5000]) sort(k, v), dimensions={1}, to_apply=less_kv""", less_kv)),
        ("sort_many_short_columns", _module("sortcols", """  k = f16[64,33,7] parameter(0)
  v = bf16[64,33,7] parameter(1)
  ROOT s = (f16[64,33,7], bf16[64,33,7]) sort(k, v), dimensions={1}, is_stable=true, to_apply=less_f16""",
                                             less_f16)),
        ("sort_u8_and_a_single_element", _module("sortu8", """  k = u8[1000] parameter(0)
  s = u8[1000] sort(k), dimensions={0}, to_apply=lt_u8
  z = f32[1] parameter(1)
  s1 = f32[1] sort(z), dimensions={0}, to_apply=lt_f32
  ROOT t = (u8[1000], f32[1]) tuple(s, s1)""", lt["u8"] + "\n" + lt["f32"])),
        ("scatter_colliding_updates_every_combiner", _module("scatters", "\n".join(lines) + f"""
  ROOT t = ({types}) tuple({outputs})""", combiners)),
        ("scatter_2d_windows_out_of_bounds", _module("scatter2d", """  x = f32[7,9] parameter(0)
  i = s32[5,2] parameter(1)
  u = f32[5,3,4] parameter(2)
  ROOT s = f32[7,9] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add_f32""",
                                                   ADD["f32"])),
        ("dynamic_update_slice_in_place_and_copying", _module("dus", """  x = f32[20,9] parameter(0)
  u = f32[4,5] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  e = f32[20,9] exponential(x)
  inplace = f32[20,9] dynamic-update-slice(e, u, i, j)
  copied = f32[20,9] dynamic-update-slice(x, u, j, i)
  ROOT t = (f32[20,9], f32[20,9], f32[20,9]) tuple(inplace, copied, x)""")),
        # Large enough for the GPU's big dot kernels, with ragged edges (sizes that are no multiple
        # of a tile) and a fused bias + relu epilogue: at default precision the TF32 tensor-core
        # kernel (128x128 tiles), at highest precision the f32 register-tiled one (128x128 tiles,
        # and 64x64 tiles with a batch).
        ("dot_tf32_tensor_cores_with_epilogue", _module("dottf32", """  a = f32[2100,67] parameter(0)
  b = f32[67,2000] parameter(1)
  bias = f32[2000] parameter(2)
  d = f32[2100,2000] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[2100,2000] broadcast(bias), dimensions={1}
  s = f32[2100,2000] add(d, bb)
  z = f32[] constant(0)
  zb = f32[2100,2000] broadcast(z), dimensions={}
  ROOT r = f32[2100,2000] maximum(s, zb)""")),
        ("dot_register_tiled_128_with_epilogue", _module("dot128", """  a = f32[2100,67] parameter(0)
  b = f32[67,2000] parameter(1)
  bias = f32[2000] parameter(2)
  d = f32[2100,2000] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
  bb = f32[2100,2000] broadcast(bias), dimensions={1}
  s = f32[2100,2000] add(d, bb)
  z = f32[] constant(0)
  zb = f32[2100,2000] broadcast(z), dimensions={}
  ROOT r = f32[2100,2000] maximum(s, zb)""")),
        ("dot_register_tiled_64_batched", _module("dot64", """  q = f32[8,250,64] parameter(0)
  k = f32[8,260,64] parameter(1)
  ROOT s = f32[8,250,260] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}""")),
        # Row fusions: a layer norm with a scale over two row dimensions (4 x 3 rows of 5 x 70),
        # a log-softmax with rows that do not divide among the threads, and a softmax whose rows
        # split into 16-byte vectors.
        ("row_fusion_layer_norm_and_log_softmax", _module("rows", """  x = f32[4,3,5,70] parameter(0)
  zero = f32[] constant(0)
  s = f32[4,3] reduce(x, zero), dimensions={2,3}, to_apply=add_f32
  n = f32[] constant(350)
  nb = f32[4,3] broadcast(n), dimensions={}
  mean = f32[4,3] divide(s, nb)
  mb = f32[4,3,5,70] broadcast(mean), dimensions={0,1}
  c = f32[4,3,5,70] subtract(x, mb)
  c2 = f32[4,3,5,70] multiply(c, c)
  v = f32[4,3] reduce(c2, zero), dimensions={2,3}, to_apply=add_f32
  vm = f32[4,3] divide(v, nb)
  eps = f32[] constant(1e-5)
  eb = f32[4,3] broadcast(eps), dimensions={}
  ve = f32[4,3] add(vm, eb)
  r = f32[4,3] rsqrt(ve)
  rb = f32[4,3,5,70] broadcast(r), dimensions={0,1}
  ln = f32[4,3,5,70] multiply(c, rb)
  g = f32[5,70] parameter(3)
  gb = f32[4,3,5,70] broadcast(g), dimensions={2,3}
  lg = f32[4,3,5,70] multiply(ln, gb)
  y = f32[6,5000] parameter(1)
  ninf = f32[] constant(-inf)
  m = f32[6] reduce(y, ninf), dimensions={1}, to_apply=max_f32
  mxb = f32[6,5000] broadcast(m), dimensions={0}
  d = f32[6,5000] subtract(y, mxb)
  e = f32[6,5000] exponential(d)
  t = f32[6] reduce(e, zero), dimensions={1}, to_apply=add_f32
  l = f32[6] log(t)
  lb = f32[6,5000] broadcast(l), dimensions={0}
  ls = f32[6,5000] subtract(d, lb)
  w = f32[16,1024] parameter(2)
  wm = f32[16] reduce(w, ninf), dimensions={1}, to_apply=max_f32
  wmb = f32[16,1024] broadcast(wm), dimensions={0}
  wd = f32[16,1024] subtract(w, wmb)
  we = f32[16,1024] exponential(wd)
  ws = f32[16] reduce(we, zero), dimensions={1}, to_apply=add_f32
  wsb = f32[16,1024] broadcast(ws), dimensions={0}
  sm = f32[16,1024] divide(we, wsb)
  ROOT out = (f32[4,3,5,70], f32[6,5000], f32[16,1024]) tuple(lg, ls, sm)""", ADD["f32"] + "\n" + MAX_F32)),
        ("rng_bit_generator_every_width", _module("rbg", """  s = u64[2] parameter(0)
  a = (u64[2], u32[3,333]) rng-bit-generator(s), algorithm=rng_philox
  sa = u64[2] get-tuple-element(a), index=0
  b = (u64[2], u64[1001]) rng-bit-generator(sa), algorithm=rng_philox
  sb = u64[2] get-tuple-element(b), index=0
  c = (u64[2], u16[37]) rng-bit-generator(sb), algorithm=rng_philox
  ROOT t = ((u64[2], u32[3,333]), (u64[2], u64[1001]), (u64[2], u16[37])) tuple(a, b, c)""")),
    ]


def all_cases() -> list[tuple[str, str]]:
    return (elementwise_cases() + conversion_cases() + data_movement_cases() + reduction_cases()
            + contraction_cases() + indexing_cases() + control_flow_cases() + expanded_cases()
            + collective_cases() + parallel_kernel_cases())
