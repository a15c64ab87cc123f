#!/usr/bin/env bash
# The device checks of the GPU GDN op's restructure (V-tiled walks, chunk-parallel output
# and backward, tiled / TF32 block GEMMs; src/gdn/local_pass_cuda.cu), for a machine with a
# GPU and an existing CUDA build (GDN_REQUIRE_CUDA=ON). Short: about 3 minutes on an H200.
#
#   bash scripts/gpu_gdn_check.sh [BUILD_DIR]     (default build/)
#
# 1. test_cuda_gdn with CUDA_LAUNCH_BLOCKING=1: every pass against the fp64 CPU (fp32 rel
#    L2 1e-4, fp64 1e-10), the recomputation's same bits, the CP op, and the opt-in TF32
#    path at 3e-2.
# 2. compute-sanitizer racecheck and memcheck on the small CP cases (shared-memory hazards
#    of the walks and the tiled GEMM; out-of-bounds tile loads and stores).
# 3. gdn_bench at Qwen3-Next's shape (T = 32K and 8K, Hk = 16, Hv = 32, K = V = 128), fp32
#    SIMT and then GDN_CUDA_TF32=1, GPU only.
# Writes logs under $OUT (out/gpu_gdn when unset); exits 1 when a step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${OUT:-out/gpu_gdn}
mkdir -p "$OUT"
FAIL=0
step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2
  shift 2
  echo "== $name"
  if timeout "$t" "$@" > "$OUT/${name// /_}.log" 2>&1; then
    echo "   ok"
  else
    echo "   FAILED (rc $?; $OUT/${name// /_}.log)"
    tail -20 "$OUT/${name// /_}.log"
    FAIL=1
  fi
}
step "test_cuda_gdn" 240 env CUDA_LAUNCH_BLOCKING=1 "$BUILD/tests/test_cuda_gdn"
CP_TEST="GdnContextParallel on the GPU equals the CPU op (one rank)"
if command -v compute-sanitizer > /dev/null; then
  step "racecheck" 300 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$BUILD/tests/test_cuda_gdn" "$CP_TEST"
  step "memcheck" 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$BUILD/tests/test_cuda_gdn" "$CP_TEST"
fi
SHAPES="1,32768,16,32,128,128;1,8192,16,32,128,128"
BENCH=("$BUILD/apps/gdn_bench" --device cuda --shapes "$SHAPES" --phases=false
  --skip-recurrent-above 0 --reps 5)
step "gdn_bench fp32" 150 "${BENCH[@]}"
step "gdn_bench tf32" 150 env GDN_CUDA_TF32=1 "${BENCH[@]}"
grep -h '"variant"' "$OUT"/gdn_bench_*.log 2> /dev/null | cut -c1-200
exit $FAIL
