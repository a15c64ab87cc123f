#!/usr/bin/env bash
# What context parallelism exchanges per layer, and how evenly the attention work falls,
# measured from gdn_train's first-step report (the Communicator's per-site counters):
#
#  1. bytes per layer per rank (rank 0, sent + received, forward + backward) of the GDN
#     layers (fixed-size pairs and the conv halo: independent of T) and of the attention
#     layers (K, V of the whole sequence: grows with T), at three sequence lengths;
#  2. attention work per rank, max/mean of the query-key pairs, for attention_load_balance
#     none and layer_local at cp = 2 and 4.
#
#   scripts/bench_cp_exchange.sh [--config configs/tiny-qwen3-next.json] [--cp 4]
#       [--seq-lens "1024 4096 16384"]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
CONFIG=configs/tiny-qwen3-next.json CP=4 SEQS="1024 4096 16384"
parse_args "$0" --config CONFIG --cp CP --seq-lens SEQS -- "$@"
bash scripts/build.sh >/dev/null
. scripts/lib/mpi.sh
run() {  # run NP ARGS...: the first-step report of a 1-step run
  mpi_run "$1" 1 gdn_train --config "$CONFIG" --steps 1 --batch 1 --dp 1 "${@:2}" 2>&1
}
# Sums "sent" + "received" over the sites matching a pattern, in bytes.
bytes() {
  grep "exchange per step on rank 0, $1" | sed -E 's/.*calls, ([0-9.]+ [KMG]?i?B) sent, ([0-9.]+ [KMG]?i?B) received/\1 \2/' |
    awk 'function b(x, u) { return x * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 1) }
         { s += b($1, $2) + b($3, $4) } END { printf "%.0f", s }'
}
model=$(run 1 --seq-len 64 | grep -m1 "model qwen" | sed 's/.*model //')
gdn=$(echo "$model" | sed -E 's/.*\(([0-9]+) GDN.*/\1/')
attn=$(echo "$model" | sed -E 's/.* ([0-9]+) attention\).*/\1/')
echo "$CONFIG: $model"
echo "cp = $CP; bytes per layer on rank 0 in one step (sent + received, forward + backward)"
printf "%8s | %16s | %16s | %8s\n" seq_len "GDN B/layer" "attention B/layer" ratio
for T in $SEQS; do
  out=$(run "$CP" --cp "$CP" --seq-len "$T")
  g=$(echo "$out" | bytes "cp\.")
  a=$(echo "$out" | bytes "attn\.")
  awk -v T="$T" -v g="$g" -v a="$a" -v ng="$gdn" -v na="$attn" \
    'BEGIN { printf "%8d | %16.0f | %16.0f | %8.1f\n", T, g / ng, a / na, (a / na) / (g / ng) }'
done
echo
echo "attention work per rank (query-key pairs), max/mean, seq_len $(echo "$SEQS" | awk '{print $1}')"
printf "%4s | %8s | %11s\n" cp none layer_local
for P in 2 4; do
  row=""
  for lb in none layer_local; do
    r=$(run "$P" --cp "$P" --seq-len "$(echo "$SEQS" | awk '{print $1}')" --attention-load-balance "$lb" |
      grep "attention work per rank" | sed -E 's/.*max\/mean ([0-9.]+).*/\1/')
    row+=" | $(printf '%8s' "$r")"
  done
  printf "%4d%s\n" "$P" "$row"
done
