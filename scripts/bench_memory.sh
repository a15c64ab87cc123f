#!/usr/bin/env bash
# Peak resident memory per rank of a training step as the sequence grows, for cp = 1, 2, 4
# and activation recomputation off and on: one gdn_train run per cell (1 step, batch 1),
# the largest rank's peak RSS from its closing line, and gdn_train's own estimate beside it.
#
#   scripts/bench_memory.sh [--config configs/bench-memory.json] [--seq-lens "4096 16384 65536 131072"]
#       [--cps "1 2 4"] [--dtype f32]
#
# Prints a table  seq_len | cp | recompute | peak RSS | estimate | peak / peak(cp=1), the
# cp = 4 / cp = 1 ratio at the longest length, and the slope of the recomputing runs'
# peak in bytes per token of the shard (T / cp). A run the estimate refuses (it would not
# fit) shows "does not fit".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
CONFIG=configs/bench-memory.json SEQS="4096 16384 65536 131072" CPS="1 2 4" DTYPE=f32
parse_args "$0" --config CONFIG --seq-lens SEQS --cps CPS --dtype DTYPE -- "$@"
bash scripts/build.sh gdn_train >/dev/null
. scripts/lib/mpi.sh
to_bytes() {  # "1.5 GiB" -> bytes
  awk '{ u = $2; x = $1; m = (u == "KiB") ? 1024 : (u == "MiB") ? 1048576 : (u == "GiB") ? 1073741824 : 1;
         printf "%.0f", x * m }'
}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "$CONFIG ($DTYPE, batch 1): peak resident memory of the largest rank"
printf "%8s | %3s | %9s | %10s | %10s | %8s\n" seq_len cp recompute "peak RSS" estimate "vs cp=1"
for T in $SEQS; do
  for rc in none layer; do
    base=""
    for cp in $CPS; do
      out=$(mpi_run "$cp" "$(threads_per_rank "$cp")" gdn_train \
        --config "$CONFIG" --cp "$cp" --dp 1 --seq-len "$T" --recompute "$rc" --dtype "$DTYPE" \
        --steps 1 --watchdog-s 0 2>&1) || true
      est=$(echo "$out" | grep -m1 "memory per rank (estimate)" | sed -E 's/.*estimate\): ([0-9.]+ [KMGT]?i?B).*/\1/' || true)
      if grep -q "the model does not fit" <<<"$out"; then
        printf "%8d | %3d | %9s | %10s | %10s | %8s\n" "$T" "$cp" "$rc" "does not fit" \
          "$(echo "$out" | grep -m1 -o 'needs an estimated [0-9.]* [KMGT]iB' | sed 's/needs an estimated //' || true)" "-"
        continue
      fi
      peak=$(echo "$out" | grep "peak RSS of the largest rank" | sed -E 's/.*largest rank ([0-9.]+ [KMGT]?i?B).*/\1/' || true)
      if [ -z "$peak" ]; then
        echo "$out" | tail -5 >&2
        printf "%8d | %3d | %9s | %10s\n" "$T" "$cp" "$rc" "failed"
        continue
      fi
      pb=$(echo "$peak" | to_bytes)
      [ -n "$base" ] || base=$pb
      echo "$T $cp $rc $pb" >>"$results"
      printf "%8d | %3d | %9s | %10s | %10s | %8.3f\n" "$T" "$cp" "$rc" "$peak" "$est" \
        "$(awk -v a="$pb" -v b="$base" 'BEGIN { print a / b }')"
    done
  done
done
echo
longest=$(echo "$SEQS" | awk '{print $NF}')
awk -v T="$longest" '$1 == T && $2 == 1 { one[$3] = $4 } $1 == T && $2 == 4 { four[$3] = $4 }
  END { for (r in four) if (one[r] > 0) printf "seq_len %d, recompute %s: cp=4 / cp=1 peak = %.3f\n", T, r, four[r] / one[r] }' "$results"
# Slope of the recomputing runs: peak against shard tokens T / cp, least squares.
awk '$3 == "layer" { x = $1 / $2; y = $4; n++; sx += x; sy += y; sxx += x * x; sxy += x * y }
  END { if (n > 1) { b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        printf "recompute layer: peak grows by %.0f bytes per shard token (least squares over %d runs)\n", b, n } }' "$results"
# The longest sequence each layout would train: each (cp, recompute) row's peak per rank
# fitted as a + b T over the lengths run, solved for a + b T = MemTotal / cp (all cp ranks
# on this machine, as here) and for a + b T = MemTotal (one rank per machine like this).
# An extrapolation of the measured peaks (activations are linear in T / cp; the LM head's
# block is fixed), rounded down to a multiple of 1024.
mem=$(awk '/^MemTotal:/ { print $2 * 1024 }' /proc/meminfo)
echo "longest seq_len from a linear fit of the peaks per layout, MemTotal $(awk -v m="$mem" 'BEGIN { printf "%.1f GiB", m / 1073741824 }'):"
awk -v M="$mem" '{ k = $2 " " $3; n[k]++; sx[k] += $1; sy[k] += $4; sxx[k] += $1 * $1; sxy[k] += $1 * $4 }
  END { for (k in n) if (n[k] > 1) {
          b = (n[k] * sxy[k] - sx[k] * sy[k]) / (n[k] * sxx[k] - sx[k] * sx[k]); a = (sy[k] - b * sx[k]) / n[k];
          split(k, f, " ");
          printf "  cp %d, recompute %-5s: %6.0f bytes per rank per token of the sequence; all ranks on this machine: %8d tokens; one rank per machine: %8d tokens\n",
            f[1], f[2], b, int((M / f[1] - a) / b / 1024) * 1024, int((M - a) / b / 1024) * 1024 } }' "$results" | sort -k2n -k4
