"""Choose how each dot runs on the CPU and write it into the HLO (``dot-strategy``).

A student reading the optimized HLO should see whether a matrix product became
a library call or emitted loops, the way XLA's CPU dumps show ``ynn_fusion``
or Eigen custom calls. The choice lands in the dot's ``backend_config``.

Before::

    ENTRY main {
      a = f32[2,3] parameter(0)
      b = f32[3,4] parameter(1)
      small = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      c = bf16[2,3] parameter(2)
      d = bf16[3,4] parameter(3)
      half = bf16[2,4] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      ROOT t = (f32[2,4], bf16[2,4]) tuple(small, half)
    }

After (only the dots' ``backend_config`` changes)::

    ENTRY main {
      a = f32[2,3] parameter(0)
      b = f32[3,4] parameter(1)
      small = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},
          backend_config={"dot_strategy":"loops"}
      c = bf16[2,3] parameter(2)
      d = bf16[3,4] parameter(3)
      half = bf16[2,4] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0},
          backend_config={"dot_strategy":"elemental"}
      ROOT t = (f32[2,4], bf16[2,4]) tuple(small, half)
    }

``blas`` calls OpenBLAS's gemm (f32 and f64 products of at least 48^3 multiply-adds,
when OpenBLAS is installed: a 512x512 f32 ``dot`` would get it; the example shows the two
choices that do not depend on the machine). Any dot whose operands are matrices in memory takes
it: free or contracting dimensions that lie one after the other fold into one (``x @ W`` on
``f32[8,128,256]`` activations is one 1024-row product), transposes become the call's ``Trans``
flags, and batch dimensions anywhere become a loop of calls. The pass's note says which, e.g.
``dot.4: blas, one gemm 1024x256 @ 256x2048 (rows of lhs [8, 128] folded by layout), B transposed
in the call``. ``loops`` is an emitted i-k-j loop nest
(small matrices, integer types); ``elemental`` is one inner product per output element
(general dimension numbers, f16/bf16 -- which the CPU pipeline's ``change-op-data-type`` turns
into f32 products before this pass runs).
"""

from __future__ import annotations

from xla_teach.backends.cpu.kernels.dot import explain_dot_strategy
from xla_teach.hlo.backend_config import backend_config_object, set_backend_config_field
from xla_teach.hlo.ir import HloModule
from xla_teach.passes.pass_base import HloPass


class DotStrategy(HloPass):
    name = "dot-strategy"
    is_optimization = False

    def run(self, module: HloModule) -> bool:
        changed = False
        for instr in module.instructions():
            if instr.opcode != "dot":
                continue
            config = backend_config_object(instr)
            if config is None or "dot_strategy" in config:
                continue
            strategy, why = explain_dot_strategy(instr)
            set_backend_config_field(instr, "dot_strategy", strategy)
            self.note(f"{instr.name}: {strategy}, {why}")
            changed = True
        return changed
