"""jit: module naming, the compile cache (hits, misses, recompiles), static arguments,
pytrees in and out, stage introspection."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import namedtuple

import numpy as np
import pytest

import xla_teach
import xla_teach.numpy as xnp
from xla_teach import flags
from xla_teach.frontend.pytree import register_dataclass, tree_flatten, tree_unflatten


def model_fn(x, y, z):
    return xnp.sum(x + y * z)


def test_module_is_named_after_the_function_and_computes_like_numpy():
    f = xla_teach.jit(model_fn, backend="interpreter")
    x, y, z = (np.arange(8, dtype=np.float32) + k for k in range(3))
    assert f.lower(x, y, z).module.name == "jit_model_fn"
    np.testing.assert_allclose(f(x, y, z), np.sum(x + y * z))


def test_hlo_text_of_the_seed_example():
    text = xla_teach.jit(model_fn).lower(*[np.ones(1024, np.float32)] * 3).as_text("hlo")
    module = xla_teach.parse_hlo(text)  # the printed text parses back
    opcodes = [i.opcode for i in module.entry.instructions]
    assert opcodes.count("parameter") == 3 and "multiply" in opcodes and "add" in opcodes
    assert module.entry.root.opcode == "reduce"
    assert 'op_name="jit(model_fn)/mul"' in text and f'source_file="{os.path.relpath(__file__)}"' in text


def test_cache_hit_miss_and_recompile_on_new_shapes(caplog):
    f = xla_teach.jit(model_fn, backend="interpreter")
    a = np.ones(4, np.float32)
    f(a, a, a)
    f(a + 1, a, a)  # same signature: hit
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 1, 1)
    with caplog.at_level(logging.INFO, logger="xla_teach.jit"):
        b = np.ones(6, np.float32)
        np.testing.assert_allclose(f(b, b, b), 12.0)
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 2, 2)
    assert info.compile_seconds > 0
    assert [e.reason for e in f.compile_log][0] == "first call"
    assert "f32[4]" in f.compile_log[1].reason and "f32[6]" in f.compile_log[1].reason
    assert "recompiling" in caplog.text
    f(a, a, a)  # the old entry is still there
    assert f.cache_info().hits == 2


def test_dtype_and_weak_scalar_are_part_of_the_key():
    f = xla_teach.jit(lambda x: x * 2, backend="interpreter")
    assert f(np.ones(3, np.float32)).dtype == np.float32
    assert f(np.ones(3, np.int32)).dtype == np.int32
    assert f(3.0).dtype == np.float32  # a Python float is a weakly typed f32
    assert f.cache_info().misses == 3


def test_flags_and_backend_are_part_of_the_key():
    f = xla_teach.jit(model_fn, backend="interpreter")
    a = np.ones(4, np.float32)
    f(a, a, a)
    with flags.override(xla_disable_hlo_passes="dce"):
        f(a, a, a)
    assert f.cache_info().misses == 2
    g = xla_teach.jit(model_fn, backend="cpu")
    assert g.lower(a, a, a).compile().backend == "cpu"


def test_static_argnums_and_argnames():
    def tile(x, n, *, axis):
        return xnp.concatenate([x] * n, axis=axis)

    f = xla_teach.jit(tile, static_argnums=1, static_argnames="axis", backend="interpreter")
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(f(x, 2, axis=0), np.concatenate([x, x], 0))
    np.testing.assert_array_equal(f(x, 3, axis=1), np.concatenate([x] * 3, 1))
    np.testing.assert_array_equal(f(x, 2, axis=0), np.concatenate([x, x], 0))
    assert f.cache_info().misses == 2 and f.cache_info().hits == 1


def test_unhashable_static_argument_and_non_array_argument_are_clear_errors():
    f = xla_teach.jit(lambda x, shape: xnp.reshape(x, shape), static_argnums=1, backend="interpreter")
    with pytest.raises(ValueError, match="hashable"):
        f(np.ones(4), [2, 2])
    g = xla_teach.jit(lambda x, s: x, backend="interpreter")
    with pytest.raises(ValueError, match="static_argnums"):
        g(np.ones(2), "hello")


Params = namedtuple("Params", "w b")


@register_dataclass(meta_fields=("activation",))
@dataclasses.dataclass
class Layer:
    params: Params
    scale: np.ndarray
    activation: str = "relu"


def test_pytrees_in_and_out():
    def f(layer, batch, extra):
        h = batch["x"] @ layer.params.w + layer.params.b
        if layer.activation == "relu":  # a static (meta) field: plain Python
            h = xnp.maximum(h, 0.0)
        return {"h": h * layer.scale, "pair": (extra[0] + 1, [extra[1] * 2])}, None, Layer(layer.params, layer.scale
                                                                                          * 2, layer.activation)

    rng = np.random.default_rng(0)
    layer = Layer(Params(rng.normal(size=(3, 2)).astype(np.float32), np.ones(2, np.float32)), np.float32(3.0))
    batch = {"x": rng.normal(size=(4, 3)).astype(np.float32)}
    out, nothing, new_layer = xla_teach.jit(f, backend="interpreter")(layer, batch, (np.int32(1), np.float32(2)))
    expected = np.maximum(batch["x"] @ layer.params.w + 1, 0) * 3
    np.testing.assert_allclose(out["h"], expected, rtol=1e-6)
    assert out["pair"][0] == 2 and out["pair"][1][0] == 4.0 and isinstance(out["pair"][1], list)
    assert nothing is None
    assert isinstance(new_layer, Layer) and isinstance(new_layer.params, Params)
    assert new_layer.activation == "relu" and new_layer.scale == 6.0


def test_pytree_flatten_roundtrip_and_dict_key_order():
    tree = {"b": [1, (2, None)], "a": Params(3, {"z": 4, "y": 5})}
    leaves, treedef = tree_flatten(tree)
    assert leaves == [3, 5, 4, 1, 2]  # sorted dict keys, depth first
    assert tree_unflatten(treedef, leaves) == tree


def test_python_scalar_outputs_and_constant_outputs():
    f = xla_teach.jit(lambda x: (x, 2.5, np.arange(3)), backend="interpreter")
    x, c, r = f(np.float32(1))
    assert c == np.float32(2.5) and c.dtype == np.float32
    np.testing.assert_array_equal(r, np.arange(3))


def test_identity_function_and_no_argument_function():
    assert xla_teach.jit(lambda x: x, backend="cpu")(np.arange(3.0))[2] == 2.0
    np.testing.assert_array_equal(xla_teach.jit(lambda: xnp.arange(4), backend="cpu")(), np.arange(4))


def test_nested_jit_is_inlined():
    inner = xla_teach.jit(lambda x: x * 2)
    outer = xla_teach.jit(lambda x: inner(x) + 1, backend="interpreter")
    np.testing.assert_array_equal(outer(np.arange(3.0)), np.arange(3.0) * 2 + 1)
    assert inner.cache_info().misses == 0


def test_eager_mode_runs_xnp_functions_outside_jit():
    np.testing.assert_allclose(xnp.exp(np.zeros(3, np.float32)), np.ones(3))
    np.testing.assert_array_equal(xnp.arange(5), np.arange(5))
    np.testing.assert_array_equal(xnp.at(np.zeros(3, np.float32))[1].set(5.0), [0, 5, 0])
    assert xnp.zeros((2, 3)).dtype == np.float32  # the default float is float32


def test_stages_of_the_cpu_backend():
    a = np.ones(16, np.float32)
    lowered = xla_teach.jit(model_fn).lower(a, a, a)
    assert "fusion" not in lowered.as_text("hlo")
    compiled = lowered.compile()
    optimized = compiled.as_text("optimized_hlo")
    assert "fusion" in optimized and lowered.as_text("optimized_hlo") == optimized
    assert "define" in compiled.as_text("llvm_ir")
    assert compiled.as_text("optimized_llvm_ir")
    assert compiled.as_text("asm")
    assert "allocation" in compiled.as_text("buffer-assignment")
    assert compiled.as_text("optimized_hlo_dot").lstrip().startswith("digraph")
    with pytest.raises(NotImplementedError, match="ptx"):
        compiled.as_text("ptx")
    with pytest.raises(ValueError, match="known stages"):
        compiled.as_text("mlir")
    records = compiled.pass_records()
    assert records and any(r.changed for r in records)
    np.testing.assert_allclose(compiled(a, a, a), 32.0)


def test_interpreter_has_no_code_generation_stages():
    compiled = xla_teach.jit(model_fn, backend="interpreter").lower(*[np.ones(3, np.float32)] * 3).compile()
    with pytest.raises(NotImplementedError, match="interpreter"):
        compiled.as_text("llvm_ir")


def test_cost_and_memory_analysis():
    x = np.ones((8, 4), np.float32)
    w = np.ones((4, 2), np.float32)
    compiled = xla_teach.jit(lambda x, w: xnp.exp(x @ w), backend="interpreter").lower(x, w).compile()
    cost = compiled.cost_analysis()
    assert cost["flops"] == 2 * 4 * 8 * 2
    assert cost["transcendentals"] == 8 * 2
    assert cost["bytes accessed"] >= 4 * (8 * 4 + 4 * 2 + 8 * 2)
    memory = compiled.memory_analysis()
    assert memory.argument_size_in_bytes == 4 * (32 + 8) and memory.output_size_in_bytes == 4 * 16


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="unknown backend"):
        xla_teach.jit(model_fn, backend="tpu")


def test_jitted_modules_and_gradients_are_dumped(tmp_path):
    with flags.override(xla_dump_to=str(tmp_path), xla_dump_hlo_as_text=True):
        xla_teach.jit(model_fn, backend="interpreter")(*[np.ones(3, np.float32)] * 3)
        xla_teach.jit(xla_teach.grad(lambda x: xnp.sum(x * x)), backend="interpreter")(np.ones(3, np.float32))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert any("jit_model_fn" in n and "before_optimizations" in n for n in names), names
    assert any("jit_grad_lambda" in n for n in names), names


def test_a_compiled_executable_only_takes_the_arguments_it_was_compiled_for() -> None:
    """As JAX's ``Compiled``: other shapes are an error, not a silent retrace."""
    f = xla_teach.jit(lambda a: a * 2)
    compiled = f.lower(np.ones(3, np.float32)).compile()
    np.testing.assert_array_equal(compiled(np.arange(3, dtype=np.float32)), [0.0, 2.0, 4.0])
    with pytest.raises(TypeError, match=r"compiled for arguments \(f32\[3\]\) and is called with \(f32\[4\]\)"):
        compiled(np.ones(4, np.float32))


def test_parameters_carry_their_pytree_path_as_op_name() -> None:
    """As JAX writes it: a parameter's op_name is where the leaf sits in the arguments."""
    from collections import namedtuple

    Pair = namedtuple("Pair", ["a", "b"])

    def f(params, batch, pair, *, scale):  # type: ignore[no-untyped-def]
        return params["w"] @ batch[0] + params["b"] + pair.b + scale

    args = ({"w": np.ones((2, 3), np.float32), "b": np.ones(2, np.float32)},
            [np.ones(3, np.float32), np.ones(3, np.float32)], Pair(np.ones(2, np.float32), np.ones(2, np.float32)))
    module = xla_teach.jit(f).lower(*args, scale=np.float32(2)).module
    paths = [p.metadata.fields["op_name"] for p in module.entry.parameter_instructions]
    assert paths == ["params['b']", "params['w']", "batch[0]", "batch[1]", "pair.a", "pair.b", "scale"]
    text = module.to_text()
    assert "op_name=\"params[\\'w\\']\"" in text  # printed with XLA's C escapes

    from xla_teach.tools.render import hlo_to_dot

    assert "params[&#39;w&#39;]" in hlo_to_dot(module) or "params['w']" in hlo_to_dot(module)
