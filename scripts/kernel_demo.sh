#!/usr/bin/env bash
# The GDN operator alone: gdn_kernel forward + backward on generated inputs (B=1, T=4096,
# Hk=2, Hv=4, K=V=64, fp64, with h0 and dht; slow decay so the state carries across all
# four shards instead of fading within one) on 1 rank and on 4 context-parallel ranks
# (linear and log-depth scan), then the parity table of 4 ranks against 1 and the bytes
# each rank moved, against the sequence-length-independent formula of docs/design.md §9.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
no_arguments "$0" "$@"
bash scripts/build.sh gdn_kernel gdn_make_inputs gdn_npy_diff >/dev/null
. scripts/lib/mpi.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

B=1 T=4096 HK=2 HV=4 K=64 V=64
"$BIN/gdn_make_inputs" --out "$WORK/in" --B $B --T $T --Hk $HK --Hv $HV --K $K --V $V \
  --dtype f64 --h0 --backward --seed 1 --g-scale 0.01

run() {  # run NAME NP [ARGS...]: one thread per rank unless the cores allow more
  local name=$1 np=$2
  shift 2
  mpi_run "$np" "$(threads_per_rank "$np")" gdn_kernel \
    --in "$WORK/in" --out "$WORK/$name" --backward "$@"
}
run cp1 1
run cp4 4
run cp4_log 4 --log-depth-scan

echo
echo "== parity: 4 ranks vs 1 rank (fp64, forward and backward) =="
"$BIN/gdn_npy_diff" "$WORK/cp4" "$WORK/cp1" --tol 1e-10
echo
echo "== parity: 4 ranks, log-depth scan vs 1 rank =="
"$BIN/gdn_npy_diff" "$WORK/cp4_log" "$WORK/cp1" --tol 1e-10

P=4
FWD=$((P * B * HV * K * (K + V) * 8))
BWD=$((P * B * HV * K * V * 8))
PAIR=$((B * HV * K * (K + V) * 8))
echo
echo "== payload per rank (stats.json), expected: forward P*B*Hv*K*(K+V)*8 = $FWD bytes," \
  "backward P*B*Hv*K*V*8 = $BWD bytes, at any T =="
status=0
check() {  # check STATS SECTION SITE EXPECTED: bytes received per rank
  while read -r rank got; do
    local verdict=ok
    [ "$got" -eq "$4" ] || { verdict=MISMATCH; status=1; }
    printf '  %-8s %-26s rank %s received %8d bytes (expected %d) %s\n' "$2" "$3" "$rank" \
      "$got" "$4" "$verdict"
  done < <(jq -r ".$2[\"$3\"][] | \"\(.rank) \(.bytes_received)\"" "$1")
}
check "$WORK/cp4/stats.json" forward cp.fwd.allgather_pairs $FWD
check "$WORK/cp4/stats.json" backward cp.bwd.allgather_adjoints $BWD
echo
echo "== log-depth scan: pairs sent per rank (at most ceil(log2 4) = 2 per direction) =="
jq -r --argjson pair $PAIR '.forward["cp.fwd.log_depth_scan"][] |
  "  forward  rank \(.rank) sent \(.bytes_sent) bytes = \(.bytes_sent / $pair) pairs"' \
  "$WORK/cp4_log/stats.json"
echo
echo "== wall time (max over ranks) =="
for name in cp1 cp4 cp4_log; do
  jq -r --arg n "$name" '"  \($n): forward \(.seconds.forward) s, backward \(.seconds.backward) s"' \
    "$WORK/$name/stats.json"
done
exit $status
