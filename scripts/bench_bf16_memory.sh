#!/usr/bin/env bash
# The bf16 mode's memory against f32's (issue 36's target): for each cp, one gdn_train step
# (batch 1, --recompute none) per dtype at --seq-len and at --floor-len (a short sequence:
# the process's own floor, MPI and the training state), the largest rank's exact peak RSS
# (peak_rss of the step's log line) and gdn_train's estimate, then the activation part of
# bf16 against f32's two ways: less the state (parameters, gradients, moments: the
# estimate's own figure) and less each dtype's floor run.
#
#   scripts/bench_bf16_memory.sh [--config configs/bench-step.json] [--seq-len 16384]
#       [--floor-len 256] [--cps "1 4"]
#
# Prints the CPU beside the figures. One run per cell: RSS is not noisy, but the order of
# allocations moves it by tens of MiB (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
CONFIG=configs/bench-step.json SEQ=16384 FLOOR=256 CPS="1 4"
parse_args "$0" --config CONFIG --seq-len SEQ --floor-len FLOOR --cps CPS -- "$@"
. scripts/lib/bench_run.sh
# run CP DTYPE T: the peak RSS in bytes, and the state the estimate counts, in MiB.
run() {
  local log=$work/$1-$2-$3.jsonl out
  out=$(mpi_run "$1" "$(threads_per_rank "$1")" gdn_train --config "$CONFIG" --cp "$1" --dp 1 \
    --seq-len "$3" --recompute none --dtype "$2" --steps 1 --watchdog-s 0 --log "$log" 2>&1) ||
    { echo "$out" | tail -5 >&2; echo "gdn_train --cp $1 --dtype $2 --seq-len $3 failed" >&2; exit 1; }
  peak=$(jq -r '.peak_rss' "$log" | tail -1)
  estimate=$(grep -m1 -o 'estimate): [0-9.]* [KMGT]iB' <<<"$out" | sed 's/estimate): //' || true)
  state=$(grep -m1 -o 'parameters [0-9.]* [KMG]iB, gradients [0-9.]* [KMG]iB, AdamW moments [0-9.]* [KMG]iB' <<<"$out" |
    awk '{ s = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) {
             u = $(i + 1); m = u ~ /^GiB/ ? 1024 : u ~ /^MiB/ ? 1 : 1 / 1024; s += $i * m }
           printf "%.0f", s }')
}
echo "$CONFIG: per-rank peak RSS of one step, batch 1, recompute none"
cpu_line
printf "%3s | %5s | %9s | %9s | %9s | %11s\n" cp dtype "peak" "floor" "estimate" "state (est)"
for cp in $CPS; do
  declare -A P=() F=() S=()
  for dt in f32 bf16; do
    run "$cp" "$dt" "$SEQ"
    P[$dt]=$(mib "$peak") S[$dt]=$state est=$estimate
    run "$cp" "$dt" "$FLOOR"
    F[$dt]=$(mib "$peak")
    printf "%3d | %5s | %5d MiB | %5d MiB | %9s | %7d MiB\n" "$cp" "$dt" "${P[$dt]}" "${F[$dt]}" \
      "$est" "${S[$dt]}"
  done
  awk -v pf="${P[f32]}" -v pb="${P[bf16]}" -v ff="${F[f32]}" -v fb="${F[bf16]}" -v s="${S[f32]}" \
    -v cp="$cp" 'BEGIN { printf "cp %d: bf16 activations / f32 activations = %.3f less the state, %.3f less each floor\n",
      cp, (pb - s) / (pf - s), (pb - fb) / (pf - ff) }'
done
