#!/usr/bin/env bash
# What context parallelism exchanges per layer, and how evenly the attention work falls,
# measured from gdn_train's first step (the Communicator's per-site counters, every rank's
# written by --exchange-out) and printed as the benchmarks' table (gdn_bench_table):
#
#  1. bytes per layer per rank (rank 0, sent + received, forward + backward) of the GDN
#     layers (fixed-size pairs and the conv halo: independent of T) and of the attention
#     layers (K, V of the whole sequence: grows with T), at three sequence lengths;
#  2. attention work per rank, max/mean of the query-key pairs, for attention_load_balance
#     none and layer_local at cp = 2 and 4.
#
# The check column holds each row against gdn_plan's prediction for the same flags (an
# independent count, docs/design.md §10): table 1 every rank's calls and bytes at every
# call site, exactly (error: the summed |measured - predicted| over the summed prediction);
# table 2 the max/mean within the log's rounding. Exits 1 when a row is wrong.
#
#   scripts/bench_cp_exchange.sh [--config configs/tiny-qwen3-next.json] [--cp 4]
#       [--seq-lens "1024 4096 16384"]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
CONFIG=configs/tiny-qwen3-next.json CP=4 SEQS="1024 4096 16384"
parse_args "$0" --config CONFIG --cp CP --seq-lens SEQS -- "$@"
bash scripts/build.sh gdn_train gdn_plan gdn_bench_table >/dev/null
. scripts/lib/mpi.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# run NAME NP ARGS...: a 1-step run, its log in $WORK/NAME.log, its counters in NAME.json;
# gdn_plan's prediction for the same flags in NAME.plan.json.
run() {
  local name=$1 np=$2 args=(--config "$CONFIG" --batch 1 --dp 1 "${@:3}")
  mpi_run "$np" 1 gdn_train "${args[@]}" --steps 1 --exchange-out "$WORK/$name.json" \
    >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log" >&2; exit 1; }
  "$BIN/gdn_plan" "${args[@]}" --json >"$WORK/$name.plan.json"
}
run model 1 --seq-len 64
model=$(grep -m1 "model qwen" "$WORK/model.log" | sed 's/.*model //')
gdn=$(echo "$model" | sed -E 's/.*\(([0-9]+) GDN.*/\1/')
attn=$(echo "$model" | sed -E 's/.* ([0-9]+) attention\).*/\1/')
echo "# $CONFIG: $model"
echo "# cp = $CP; bytes per layer on rank 0 in one step (sent + received, forward + backward)"
rc=0
{
  for T in $SEQS; do
    run "t$T" "$CP" --cp "$CP" --seq-len "$T"
    # T, GDN and attention bytes per layer, their ratio, the error against the plan, tol 0.
    python3 - "$WORK/t$T.json" "$WORK/t$T.plan.json" "$T" "$gdn" "$attn" <<'PY'
import json, sys
measured = json.load(open(sys.argv[1]))["ranks"]
planned = json.load(open(sys.argv[2]))["exchange"]["ranks"]
T, n_gdn, n_attn = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
fields = ("calls", "bytes_sent", "bytes_received")
def table(ranks):
    return {(r["rank"], s, f): c[f] for r in ranks for s, c in r["sites"].items() for f in fields}
m, p = table(measured), table(planned)
diff = sum(abs(m.get(k, 0) - p.get(k, 0)) for k in set(m) | set(p))
err = diff / max(sum(p.values()), 1)
rank0 = next(r for r in measured if r["rank"] == 0)["sites"]
def per_layer(prefix, n):
    b = sum(c["bytes_sent"] + c["bytes_received"] for s, c in rank0.items() if s.startswith(prefix))
    return b / n if n else 0
g, a = per_layer("cp.", n_gdn), per_layer("attn.", n_attn)
print(T, f"{g:.0f}", f"{a:.0f}", f"{a / g:.1f}" if g else "-", f"{err:.3e}", 0)
PY
  done
  echo "# error: |measured - planned| summed over the calls and bytes of every rank's sites,"
  echo "# over the planned sum (gdn_plan --json for the same flags); tolerance 0"
} | "$BIN/gdn_bench_table" --error-unit "(rel L1)" \
  --columns "seq_len:tokens:8,GDN:(B/layer):12,attention:(B/layer):12,ratio:(x):7" || rc=1
echo
T1=$(echo "$SEQS" | awk '{print $1}')
echo "# attention work per rank (query-key pairs), max/mean, seq_len $T1"
{
  for P in 2 4; do
    for lb in none layer_local; do
      run "p$P$lb" "$P" --cp "$P" --seq-len "$T1" --attention-load-balance "$lb"
      got=$(grep "attention work per rank" "$WORK/p$P$lb.log" | sed -E 's/.*max\/mean ([0-9.]+).*/\1/')
      key=$([ "$lb" = none ] && echo contiguous || echo layer_local)
      want=$(jq ".flops.attention_balance.$key.max_over_mean" "$WORK/p$P$lb.plan.json")
      awk -v P="$P" -v lb="$lb" -v g="$got" -v w="$want" \
        'BEGIN { d = g - w; if (d < 0) d = -d; printf "%d %s %s %.3f %.3e 1e-3\n", P, lb, g, w, d / w }'
    done
  done
  echo "# planned: gdn_plan's attention_balance; the log prints 3 decimals: tolerance 1e-3"
} | "$BIN/gdn_bench_table" --error-unit "(rel)" \
  --columns "cp::4,balance::12,max/mean:measured:9,max/mean:planned:9" || rc=1
exit "$rc"
