#!/usr/bin/env bash
# Peak resident memory per rank when the training state dominates, over world size,
# train.shard and ep: one 1-step gdn_train run per cell (configs/bench-shard.json: 4 MoE
# layers of 16 experts, ~120M parameters, a 64-token sequence), the largest rank's peak
# RSS from its step log and gdn_train's own estimate of the state beside it (of which
# "gathered": the units gathered at once and the reduce buffer, which do not fall with the
# world; the owned parts do).
#
#   scripts/bench_shard_memory.sh [--config configs/bench-shard.json] [--worlds "1 2 4"]
#
# The world is cp ranks (dp 1). The state part of a run is its peak less the peak of the
# same layout with the tiny config (configs/tiny.json, no state to speak of): what the
# parameters, gradients and moments add. Prints a table  world | shard | ep | peak RSS |
# state measured | state estimated | state vs world 1 (same shard and ep 1), and the
# measured world-4 / world-1 ratio of the state part per sharding.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
CONFIG=configs/bench-shard.json WORLDS="1 2 4"
parse_args "$0" --config CONFIG --worlds WORLDS -- "$@"
bash scripts/build.sh gdn_train gdn_plan >/dev/null
. scripts/lib/mpi.sh
# peak NP CONFIG ARGS...: the largest rank's peak RSS in bytes, from the step log ("" when
# the run failed).
peak() {
  local np=$1 cfg=$2 out
  shift 2
  rm -f "$log"
  out=$(mpi_run "$np" 1 gdn_train --config "$cfg" --cp "$np" --dp 1 --steps 1 --watchdog-s 0 \
    --log "$log" "$@" 2>&1) || { echo "$out" | tail -3 >&2; return 0; }
  jq -r .peak_rss "$log"
}
# estimate NP FIELDS ARGS...: gdn_plan's estimate of rank 0, the sum of FIELDS (jq).
estimate() {
  local np=$1 fields=$2
  shift 2
  "$BIN/gdn_plan" --config "$CONFIG" --cp "$np" --dp 1 "$@" --json | jq ".memory.estimate | $fields"
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
results=$(mktemp)
log=$(mktemp)
trap 'rm -f "$results" "$log"' EXIT
echo "$CONFIG (f32, 1 sequence of 64 tokens): peak resident memory of the largest rank"
printf "%5s | %9s | %2s | %10s | %14s | %15s | %13s | %9s\n" world shard ep "peak RSS" \
  "state measured" "state estimated" "of it gathered" "vs world 1"
for W in $WORLDS; do
  base=$(peak "$W" configs/tiny.json --seq-len 64)
  for shard in none optimizer full; do
    for ep in 1 2 4; do
      [ "$ep" -gt "$W" ] && continue
      p=$(peak "$W" "$CONFIG" --shard "$shard" --ep "$ep")
      if [ -z "$p" ] || [ -z "$base" ]; then
        printf "%5d | %9s | %2d | %10s\n" "$W" "$shard" "$ep" failed
        continue
      fi
      state=$((p - base))
      est=$(estimate "$W" '.params + .grads + .moments + .gathered' --shard "$shard" --ep "$ep")
      gathered=$(estimate "$W" '.gathered' --shard "$shard" --ep "$ep")
      echo "$W $shard $ep $state" >>"$results"
      ref=$(awk -v s="$shard" '$1 == 1 && $2 == s && $3 == 1 { print $4 }' "$results")
      printf "%5d | %9s | %2d | %10s | %14s | %15s | %13s | %9s\n" "$W" "$shard" "$ep" \
        "$(mib "$p")" "$(mib "$state")" "$(mib "$est")" "$(mib "$gathered")" \
        "$([ -n "$ref" ] && awk -v a="$state" -v b="$ref" 'BEGIN { printf "%.3f", a / b }' || echo -)"
    done
  done
done
echo
last=$(echo "$WORLDS" | awk '{ print $NF }')
awk -v L="$last" '$1 == 1 && $3 == 1 { one[$2] = $4 } $1 == L { if (!($2 in best) || $4 < best[$2]) best[$2] = $4 }
  END { for (s in best) if (one[s] > 0)
          printf "shard %-9s: state part at world %d (best ep) / world 1 = %.3f (1/world = %.3f)\n", s, L, best[s] / one[s], 1 / L }' \
  "$results" | sort
