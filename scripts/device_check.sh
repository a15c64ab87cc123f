#!/usr/bin/env bash
# The GPU checks of gdn-cp in one run, for the one-H200 device machine (budget: under
# 8 minutes). Builds the CUDA build from scratch, runs the GPU tests, compares gdn_kernel
# at cp = 1 and cp = 2 on the one GPU (two ranks share it: the MPI host-staging fallback),
# compares a short gdn_train on the GPU with the CPU run (when the GPU trainer exists),
# and benchmarks the GDN op against the CPU path and, when present, fla's
# chunk_gated_delta_rule. Prints one summary table and writes it to $OUT/summary.md
# (or out/device/summary.md when OUT is unset).
#
#   device tool: run(command="bash scripts/device_check.sh", carry=[".deps", ".whl"])
#
# What the machine lacks (MPI, cxxopts, spdlog, ...) is unpacked from .deps/*.deb
# (scripts/fetch_device_deps.sh) into a private prefix, never into /.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/device}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.md"
LOG="$OUT/device_check.log"
exec > >(tee "$LOG") 2>&1
row() { printf '| %s | %s |\n' "$1" "$2" | tee -a "$SUMMARY.rows"; }
: > "$SUMMARY.rows"
t_start=$(date +%s)

echo "== what is here"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
command -v nvcc && nvcc --version | tail -1
for t in mpicxx mpirun cmake python3; do printf '%-8s %s\n' "$t" "$(command -v $t || echo missing)"; done
ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h 2>/dev/null || echo "nccl.h: not in the usual places"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>/dev/null || true

PREFIX=/tmp/gdn-deps
if ! command -v mpicxx >/dev/null || [ ! -e /usr/include/cxxopts.hpp ]; then
  if ls .deps/*.deb >/dev/null 2>&1; then
    echo "== unpacking .deps into $PREFIX"
    mkdir -p "$PREFIX"
    for f in .deps/*.deb; do dpkg -x "$f" "$PREFIX"; done
    export PATH="$PREFIX/usr/bin:$PATH"
    export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu:$PREFIX/usr/lib/x86_64-linux-gnu/openmpi/lib:${LD_LIBRARY_PATH:-}"
    export CMAKE_PREFIX_PATH="$PREFIX/usr:${CMAKE_PREFIX_PATH:-}"
    export OPAL_PREFIX="$PREFIX/usr/lib/x86_64-linux-gnu/openmpi"
    export CPATH="$PREFIX/usr/include:${CPATH:-}"
  else
    echo "missing build dependencies and no .deps/ carried (run scripts/fetch_device_deps.sh here first)"
  fi
fi

echo "== CUDA build from scratch"
BUILD=/tmp/gdn-build
rm -rf "$BUILD"
if cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/cmake.log" 2>&1 &&
   cmake --build "$BUILD" -j16 >"$OUT/build.log" 2>&1; then
  row "CUDA build" "ok ($(( $(date +%s) - t_start )) s)"
else
  row "CUDA build" "FAILED (see cmake.log / build.log)"
  tail -30 "$OUT/build.log" "$OUT/cmake.log" 2>/dev/null
  cat "$SUMMARY.rows" > "$SUMMARY"; exit 1
fi

MPI=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)

echo "== tests (GPU tests run, CPU tests as usual)"
if ctest --test-dir "$BUILD" --output-on-failure -j4 >"$OUT/ctest.log" 2>&1; then
  row "ctest (all, GPU tests included)" "$(grep -E 'tests passed' "$OUT/ctest.log")"
else
  row "ctest" "FAILED: $(grep -E 'tests passed|Failed' "$OUT/ctest.log" | tr '\n' ' ')"
fi

echo "== gdn_kernel on the GPU: cp=1 vs cp=2 (two ranks on one GPU) and vs the CPU"
W=/tmp/gdn-work; rm -rf "$W"; mkdir -p "$W"
"$BUILD/apps/gdn_make_inputs" --out "$W/in" --B 1 --T 8192 --Hk 16 --Hv 32 --K 128 --V 128 \
  --dtype f32 --h0 --backward --g-scale 0.05 >/dev/null
"${MPI[@]}" -np 1 "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/cpu" --backward --l2norm-qk --device cpu
"${MPI[@]}" -np 1 "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/gpu1" --backward --l2norm-qk --device cuda
"${MPI[@]}" -np 2 "$BUILD/apps/gdn_kernel" --in "$W/in" --out "$W/gpu2" --backward --l2norm-qk --device cuda
row "gdn_kernel GPU cp=1 vs CPU (fp32, tol 1e-4)" \
  "$("$BUILD/apps/gdn_npy_diff" "$W/gpu1" "$W/cpu" --tol 1e-4 | tail -1)"
row "gdn_kernel GPU cp=2 vs GPU cp=1 (tol 1e-5)" \
  "$("$BUILD/apps/gdn_npy_diff" "$W/gpu2" "$W/gpu1" --tol 1e-5 | tail -1)"

echo "== gdn_train on the GPU vs the CPU (20 steps)"
if ! "$BUILD/apps/gdn_train" --help 2>&1 | grep -q "GPU model is not written yet"; then
  "${MPI[@]}" -np 1 "$BUILD/apps/gdn_train" --config configs/tiny.json --steps 20 --device cpu --log "$W/cpu.jsonl" >/dev/null 2>&1
  "${MPI[@]}" -np 1 "$BUILD/apps/gdn_train" --config configs/tiny.json --steps 20 --device cuda --log "$W/gpu.jsonl" >/dev/null 2>&1
  d=$(paste <(jq -r .loss "$W/cpu.jsonl") <(jq -r .loss "$W/gpu.jsonl") |
      awk '{x = $1 - $2; if (x < 0) x = -x; if (x > m) m = x} END {printf "%.3e", m}')
  row "gdn_train 20 steps GPU vs CPU (tol 1e-3)" "max |loss diff| $d"
  # Two ranks on one GPU (staging communicator): the conv halo and pairs cross ranks.
  "${MPI[@]}" -np 2 "$BUILD/apps/gdn_train" --config configs/tiny.json --steps 20 --cp 2 --device cuda --log "$W/gpu2.jsonl" >/dev/null 2>&1
  d=$(paste <(jq -r .loss "$W/gpu.jsonl") <(jq -r .loss "$W/gpu2.jsonl") |
      awk '{x = $1 - $2; if (x < 0) x = -x; if (x > m) m = x} END {printf "%.3e", m}')
  row "gdn_train 20 steps GPU cp=2 vs GPU cp=1 (tol 1e-3)" "max |loss diff| $d"
else
  row "gdn_train on the GPU" "not built yet (no --device flag)"
fi

echo "== benchmark: the GDN op, GPU vs CPU vs fla"
"$BUILD/apps/gdn_bench" --device all --shapes "1,32768,64,64,128,128;1,8192,16,32,128,128" \
  --skip-recurrent-above 0 --reps 5 --cpu-reps 2 --cpu-warmup 0 > "$OUT/bench.jsonl" 2>"$OUT/bench.err" || true
cat "$OUT/bench.jsonl"
if python3 -c "import fla" 2>/dev/null || ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
  PYTHONPATH=/tmp/site python3 scripts/bench_fla.py >> "$OUT/bench.jsonl" 2>>"$OUT/bench.err" || true
fi
while read -r line; do
  row "bench $(echo "$line" | jq -r '"\(.variant) \(.shape.T)x\(.shape.Hv)"' 2>/dev/null)" \
      "$(echo "$line" | jq -r '"\(.median_ms) ms"' 2>/dev/null)"
done < <(grep '"variant"' "$OUT/bench.jsonl")

{ echo "| check | result |"; echo "|---|---|"; cat "$SUMMARY.rows"; } > "$SUMMARY"
rm -f "$SUMMARY.rows"
echo; cat "$SUMMARY"
echo "total $(( $(date +%s) - t_start )) s"
