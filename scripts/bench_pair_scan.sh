#!/usr/bin/env bash
# The two GDN pair scans (train.pair_scan allgather | log_depth) on CPU ranks: at each cp,
# gdn_train steps with the same shard per rank (--tokens-per-rank tokens: seq_len grows
# with cp), the sides alternating (allgather, log_depth, allgather, log_depth), and for
# each the largest rank's peak RSS (the step log's exact peak_rss), gdn_train's estimate
# and the mean step time after the first step. The pairs a rank holds are the difference
# of the two peaks; the estimate's share of them is printed beside it (P pairs of
# B Hv K (K + V) floats per GDN layer against one K x K M).
#
#   scripts/bench_pair_scan.sh [--config configs/bench-pairs.json] [--cps "2 4 8"]
#       [--tokens-per-rank 256] [--steps 3] [--recompute none]
#
# Prints the CPU beside the figures. cp 8 on a 2-core machine oversubscribes the cores: the
# times are then of 8 ranks sharing 2 cores, both sides alike.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
CONFIG=configs/bench-pairs.json CPS="2 4 8" TPR=256 STEPS=3 RECOMPUTE=none
parse_args "$0" --config CONFIG --cps CPS --tokens-per-rank TPR --steps STEPS \
  --recompute RECOMPUTE -- "$@"
. scripts/lib/bench_run.sh
# run CP SCAN TAG: sets peak (bytes), ms (mean step time after the first) and estimate.
run() {
  local log=$work/$1-$2-$3.jsonl out
  out=$(mpi_run "$1" "$(threads_per_rank "$1")" gdn_train --config "$CONFIG" --cp "$1" --dp 1 \
    --seq-len $(($1 * TPR)) --recompute "$RECOMPUTE" --pair-scan "$2" --steps "$STEPS" \
    --watchdog-s 0 --log "$log" 2>&1) ||
    { echo "$out" | tail -5 >&2; echo "gdn_train --cp $1 --pair-scan $2 failed" >&2; exit 1; }
  peak=$(jq -r '.peak_rss' "$log" | tail -1)
  ms=$(jq -s '[.[1:][].step_ms] | add / length' "$log")
  estimate=$(grep -m1 -o 'estimate): [0-9.]* [KMGT]iB' <<<"$out" | sed 's/estimate): //' || true)
}
echo "$CONFIG: $TPR tokens per rank, recompute $RECOMPUTE, $STEPS steps (time: mean of steps 2..)"
echo "$(cpu_line); $(nproc) cores"
layers=$(jq '[.model.layer_types[] | select(. == "linear_attention")] | length' "$CONFIG")
pair=$(jq '.model | .linear_num_value_heads * .linear_key_head_dim *
  (.linear_key_head_dim + .linear_value_head_dim) * 4' "$CONFIG")
m=$(jq '.model | .linear_num_value_heads * .linear_key_head_dim * .linear_key_head_dim * 4' "$CONFIG")
printf "%3s | %9s | %9s | %9s | %9s\n" cp scan "peak RSS" estimate "step"
for cp in $CPS; do
  declare -A P=() T=()
  for rep in 1 2; do
    for scan in allgather log_depth; do
      run "$cp" "$scan" "$rep"
      P[$scan$rep]=$(mib "$peak") T[$scan$rep]=$ms
      printf "%3d | %9s | %5d MiB | %9s | %6.0f ms\n" "$cp" "$scan" "${P[$scan$rep]}" "$estimate" "$ms"
    done
  done
  awk -v a1="${P[allgather1]}" -v a2="${P[allgather2]}" -v l1="${P[log_depth1]}" \
    -v l2="${P[log_depth2]}" -v ta1="${T[allgather1]}" -v ta2="${T[allgather2]}" \
    -v tl1="${T[log_depth1]}" -v tl2="${T[log_depth2]}" -v cp="$cp" -v L="$layers" \
    -v pair="$pair" -v m="$m" 'BEGIN {
      printf "cp %d: peak allgather - log_depth = %.0f MiB (the pairs: %d layers x (%d pairs - one M) = %.0f MiB); step allgather / log_depth = %.3f\n",
        cp, (a1 + a2 - l1 - l2) / 2, L, cp, L * (cp * pair - m) / 1048576, (ta1 + ta2) / (tl1 + tl2) }'
done
