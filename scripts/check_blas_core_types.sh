#!/usr/bin/env bash
# Runs the test suite once for every OpenBLAS kernel set this CPU can execute.
#
# OpenBLAS picks its kernels by CPU model (its "core type"), and each kernel set sums a product's
# terms in another order: a dot that is one correct result on a Haswell kernel is another correct
# result on a SkylakeX one. The suite compares floating-point results with error bounds worked out
# from the terms (xla_teach/hlo/evaluator/error_bounds.py), so it must pass with every kernel set;
# this script checks that on one machine by forcing each set in turn with OPENBLAS_CORETYPE (read
# by NumPy's OpenBLAS and by the scipy-openblas64 that the CPU backend calls).
#
#   scripts/check_blas_core_types.sh                    # the whole suite, every core type
#   scripts/check_blas_core_types.sh tests/backends     # only these tests (any pytest arguments)
#   CORE_TYPES="Haswell Zen" scripts/check_blas_core_types.sh
#
# CI and `make test` leave OPENBLAS_CORETYPE as the machine has it (some machines set it on
# purpose); this is a developer's check. Prints one line per core type and exits non-zero if any
# failed (each run's output is kept in a temporary folder, named at the end).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}

# The core types whose instructions this CPU has (OpenBLAS names; a kernel set the CPU cannot run
# would stop the process with an illegal instruction, which is a different failure).
core_types() {
  local flags arch
  arch=$(uname -m)
  if [ "$arch" = x86_64 ]; then
    flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    echo Prescott
    [[ $flags == *" sse4_2 "* ]] && echo Nehalem
    [[ $flags == *" avx "* ]] && echo Sandybridge
    [[ $flags == *" avx2 "* && $flags == *" fma "* ]] && echo Haswell Zen
    [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* ]] && echo SkylakeX
    [[ $flags == *" avx512_bf16 "* ]] && echo Cooperlake
    [[ $flags == *" amx_bf16 "* && $flags == *" avx512_fp16 "* ]] && echo SapphireRapids
  elif [ "$arch" = aarch64 ]; then
    flags=" $(grep -m1 '^Features' /proc/cpuinfo | cut -d: -f2) "
    echo ARMV8 CortexA57
    [[ $flags == *" asimddp "* ]] && echo NeoverseN1
    [[ $flags == *" sve "* ]] && echo NeoverseV1
    [[ $flags == *" sve2 "* ]] && echo NeoverseN2
  else
    echo "check_blas_core_types: no list of OpenBLAS core types for $arch" >&2
  fi
}

types=${CORE_TYPES:-$(core_types | tr '\n' ' ')}
logs=$(mktemp -d)
status=0
echo "OpenBLAS core types to try on this $(uname -m) CPU: $types"
for core in $types; do
  start=$(date +%s)
  OPENBLAS_CORETYPE=$core "$PY" -m pytest -p no:cacheprovider "$@" >"$logs/$core.log" 2>&1
  rc=$?
  summary=$(grep -E '(passed|failed|error)' "$logs/$core.log" | tail -1)
  printf '%-16s rc=%d  %4ds  %s\n' "$core" "$rc" "$(($(date +%s) - start))" "$summary"
  [ $rc -ne 0 ] && status=1
done
echo "logs: $logs"
exit $status
