#!/usr/bin/env bash
# Runs every check of the GPU backend that needs (or merely can use) an NVIDIA GPU, and writes the
# logs and figures to OUTDIR:
#
#   scripts/gpu_check.sh OUTDIR [STEP...]      # default: all steps
#
# Steps (each with its own time limit, seconds, from GPU_CHECK_<STEP>_S):
#   env        nvidia-smi, Python and package versions, ptxas and compute-sanitizer versions
#   ptx        the GPU tests that need no device: every emitted PTX assembles with ptxas (pass anywhere)
#   tests      the whole GPU test suite on the device (pytest -m gpu): every op case and sample, and
#              xla-teach explore on a fresh JAX GPU dump (kept as OUTDIR/xla_gpu_dump.tar.gz)
#   memcheck   compute-sanitizer --tool memcheck over the suite's kernels (all but the random modules)
#   racecheck  compute-sanitizer --tool racecheck over the kernels that use shared memory
#   notebooks  the tutorial notebooks' GPU cells (their sources run as scripts)
#   fuzz       scripts/fuzz_against_xla.py against XLA's GPU backend: as many random programs as
#              GPU_CHECK_FUZZ_SECONDS (default 240) allows, GPU_CHECK_FUZZ_JOBS (default 12) at once;
#              findings in OUTDIR/fuzz_findings
#   compare    benchmarks/gpu_xla_comparison.py: every program of xla_comparison.py (model-scale
#              steps included) against XLA's GPU compiler, wall clock and CUPTI kernel times, CUDA
#              graphs on and off (OUTDIR/compare.json)
#   bench      benchmarks/gpu_benchmark.py (copy bandwidth, launch overhead, six programs)
#
# The steps before `compare` run side by side (the machine has many cores and one GPU); the
# benchmarks run last, one at a time, so nothing disturbs their timings. Without a GPU, `env` and
# `ptx` pass and the device steps report "no CUDA device". The default steps fit in a 15-minute
# device lease with room for a rerun: `ptx` needs no device (run it at home), and the sanitizers
# (memcheck, racecheck) and `bench` are asked for by name.
# OUTDIR/summary.txt has one line per step: PASS / FAIL / TIMEOUT / SKIP and its time.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUTDIR="${1:?usage: scripts/gpu_check.sh OUTDIR [env ptx tests memcheck racecheck notebooks fuzz compare bench]}"
shift
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(env tests notebooks fuzz compare)
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
cd "$ROOT"

# The interpreter: the project's venv when it has one (a developer's machine), else python3 (a
# GPU machine's image, which has NumPy, llvmlite, cuda-python, JAX and pytest).
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
DEVICE_STEPS=(tests memcheck racecheck notebooks fuzz compare bench)
if ! "$PY" -c "from xla_teach.backends.gpu.runtime import device_available as d; raise SystemExit(not d())" \
     2>/dev/null; then
  NO_DEVICE=1
else
  NO_DEVICE=0
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg XLA_PYTHON_CLIENT_PREALLOCATE=false
export GPU_CHECK_OUTDIR="$OUTDIR"  # the XLA GPU dump test keeps its dump here (xla_gpu_dump.tar.gz)
unset XLA_FLAGS
JOBS=$(( $(nproc) > 8 ? 8 : $(nproc) ))
XDIST=()
if "$PY" -c "import xdist" 2>/dev/null && [ "$JOBS" -gt 2 ]; then XDIST=(-n "$JOBS"); fi
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -o addopts= -rfE)

has_step() { local s; for s in "${STEPS[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

# run_step NAME DEFAULT_LIMIT COMMAND...: runs COMMAND under `timeout`, output to OUTDIR/NAME.log,
# and appends NAME's verdict to summary.txt.
run_step() {
  local name=$1 default=$2; shift 2
  local var="GPU_CHECK_${name^^}_S" start rc verdict d
  for d in "${DEVICE_STEPS[@]}"; do
    if [ "$d" = "$name" ] && [ "$NO_DEVICE" = 1 ]; then
      printf '%-10s %-22s %4ss\n' "$name" "SKIP (no CUDA device)" 0 >>"$OUTDIR/summary.txt"
      return 0
    fi
  done
  local limit="${!var:-$default}"
  start=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$OUTDIR/$name.log" 2>&1
  rc=$?
  case $rc in
    0) verdict=PASS ;;
    124|137) verdict="TIMEOUT after ${limit}s" ;;
    *) verdict="FAIL (exit $rc)" ;;
  esac
  printf '%-10s %-22s %4ss\n' "$name" "$verdict" "$(( $(date +%s) - start ))" >>"$OUTDIR/summary.txt"
}

step_env() {
  set +e
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  "$PY" - <<'EOF'
import platform, importlib
print("python", platform.python_version())
for name in ("numpy", "ml_dtypes", "llvmlite", "networkx", "cuda.bindings", "jax", "pytest", "hypothesis"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as err:
        print(name, "MISSING", err)
from xla_teach.backends.gpu.runtime import device_available, unavailable_reason
print("device_available:", device_available(), unavailable_reason())
if device_available():
    from xla_teach.backends.gpu.runtime import CudaContext
    print(CudaContext.get().info)
EOF
  ptxas --version 2>&1 | tail -1
  compute-sanitizer --version 2>&1 | tail -1
  return 0
}

# compute-sanitizer over pytest in one process; the op cases launch every kind of kernel.
SANITIZE=(compute-sanitizer --error-exitcode 99 --print-limit 100 --target-processes all)
SANITIZER_TESTS=(tests/backends/gpu/test_gpu_backend.py -m gpu -k "not random_modules")

: >"$OUTDIR/summary.txt"
echo "# gpu_check $(date -u +%FT%TZ) steps: ${STEPS[*]} python: $PY" >>"$OUTDIR/summary.txt"
if has_step env; then
  start=$(date +%s); step_env >"$OUTDIR/env.log" 2>&1
  printf '%-10s %-22s %4ss\n' env PASS "$(( $(date +%s) - start ))" >>"$OUTDIR/summary.txt"
fi
# The steps before the benchmark, side by side.
pids=()
if has_step ptx; then
  run_step ptx 240 "${PYTEST[@]}" "${XDIST[@]}" tests/backends/gpu -m "not gpu" &
  pids+=($!)
fi
if has_step tests; then
  run_step tests 240 "${PYTEST[@]}" "${XDIST[@]}" tests -m gpu --junitxml="$OUTDIR/tests.xml" &
  pids+=($!)
fi
if has_step memcheck; then
  run_step memcheck 240 "${SANITIZE[@]}" --tool memcheck --leak-check no "${PYTEST[@]}" "${SANITIZER_TESTS[@]}" &
  pids+=($!)
fi
if has_step racecheck; then
  run_step racecheck 240 "${SANITIZE[@]}" --tool racecheck "${PYTEST[@]}" \
    tests/backends/gpu/test_gpu_backend.py -m gpu \
    -k "test_gpu_matches_interpreter and (reduce or transpose or dot or softmax or sort or scatter or row_fusion)" &
  pids+=($!)
fi
if has_step notebooks; then
  run_step notebooks 120 bash -c '
    set -e; tmp=$(mktemp -d); cd "$tmp"
    for nb in 01_first_jit 05_llvm_ir_assembly_ptx; do
      echo "== $nb"; "$0" "$1/notebooks/src/$nb.py" | tee "$nb.out"
      grep -q "No GPU here" "$nb.out" && { echo "$nb: the GPU cells did not run"; exit 1; }
    done
    grep -q "match: True" 05_llvm_ir_assembly_ptx.out' "$PY" "$ROOT" &
  pids+=($!)
fi
if has_step fuzz; then
  run_step fuzz $(( ${GPU_CHECK_FUZZ_SECONDS:-240} + 150 )) "$PY" scripts/fuzz_against_xla.py -n 20000 --seed 30 \
    --xla-platform gpu --backends gpu --jobs "${GPU_CHECK_FUZZ_JOBS:-12}" --chunk 200 \
    --seconds "${GPU_CHECK_FUZZ_SECONDS:-240}" --out "$OUTDIR/fuzz_findings" &
  pids+=($!)
fi
for pid in "${pids[@]}"; do wait "$pid"; done
has_step compare && run_step compare 260 "$PY" benchmarks/gpu_xla_comparison.py --json "$OUTDIR/compare.json" \
  ${GPU_CHECK_COMPARE_ARGS:-}
has_step bench && run_step bench 240 "$PY" benchmarks/gpu_benchmark.py

cat "$OUTDIR/summary.txt"
! grep -qE "FAIL|TIMEOUT" "$OUTDIR/summary.txt"
