#!/usr/bin/env bash
# Per-rank work under context parallelism: the same global batch trained at cp = 1 and
# cp = 4 (one thread per rank), and the CPU time (user + system) each rank spent in the
# steps (getrusage: reliable on a shared machine where wall time is not). Ideal is 1/4;
# the GDN layers' phase-1 pass (the transition pairs) and the attention layers' triangle
# add to it. Prints  config | balance | cp=1 CPU s | cp=4 max rank CPU s | ratio.
#
#   scripts/bench_cp_work.sh [--seq-len 8192] [--steps 3] [--config FILE]...
set -euo pipefail
cd "$(dirname "$0")/.."
SEQ=8192 STEPS=3 CONFIGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seq-len) SEQ=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --config) CONFIGS+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "bench_cp_work.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "${#CONFIGS[@]}" -gt 0 ] || CONFIGS=(configs/bench-memory.json configs/tiny-qwen3-next.json)
bash scripts/build.sh >/dev/null
BIN=${GDN_BUILD_DIR:-build}/apps
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI_FLAGS+=(--allow-run-as-root)
cpu() {  # cpu NP BALANCE CONFIG: "max mean" CPU seconds per rank in the steps
  OMP_NUM_THREADS=1 mpirun "${MPI_FLAGS[@]}" -np "$1" "$BIN/gdn_train" --config "$3" --cp "$1" \
    --dp 1 --batch 1 --seq-len "$SEQ" --steps "$STEPS" --attention-load-balance "$2" \
    --watchdog-s 0 2>&1 | grep "CPU time in the steps" |
    sed -E 's/.*max ([0-9.]+) s, mean ([0-9.]+) s.*/\1 \2/'
}
echo "seq_len $SEQ, batch 1, $STEPS steps, one thread per rank: CPU time per rank in the steps"
printf "%-28s | %11s | %9s | %14s | %15s | %6s\n" config balance "cp=1 s" "cp=4 max s" "cp=4 mean s" ratio
for c in "${CONFIGS[@]}"; do
  for lb in none layer_local; do
    read -r one _ < <(cpu 1 "$lb" "$c")
    read -r fmax fmean < <(cpu 4 "$lb" "$c")
    printf "%-28s | %11s | %9.3f | %14.3f | %15.3f | %6.3f\n" "$(basename "$c")" "$lb" "$one" \
      "$fmax" "$fmean" "$(awk -v a="$fmax" -v b="$one" 'BEGIN { print a / b }')"
  done
done
