#!/usr/bin/env bash
# The intra-rank sequence split (docs/design.md §4b) against the unsplit passes, in one run
# of gdn_split_bench per shape set: GdnContextParallel on one rank, f32, long sequences with
# B x Hv = 1 and 2, K = V = 128 and 64, S = 2, 4, 8, 16 pieces, the serial correction chain
# and the log-depth piece scan, forward and forward + backward; then the piece scans alone.
# Prints the JSON lines (also kept in --out) and a table of medians and speedups.
#
#   scripts/bench_intra_rank_split.sh [--threads 2] [--reps 5] [--seq-lens "16384 65536"]
#       [--pieces 2,4,8,16] [--dims "128 64"] [--out out/bench_intra_rank_split.jsonl]
#       [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
THREADS=2 REPS=5 SEQS="16384 65536" PIECES=2,4,8,16 DIMS="128 64"
OUT=out/bench_intra_rank_split.jsonl BUILD=1
parse_args "$0" --threads THREADS --reps REPS --seq-lens SEQS --pieces PIECES --dims DIMS \
  --out OUT --no-build BUILD=0 -- "$@"
[ "$BUILD" -eq 1 ] && bash scripts/build.sh gdn_split_bench >/dev/null
BIN=${GDN_BUILD_DIR:-build}/apps/gdn_split_bench
[ -x "$BIN" ] || { echo "bench_intra_rank_split.sh: $BIN is not built" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
echo "gdn_split_bench: OMP_NUM_THREADS=$THREADS, $REPS interleaved reps, f32, chunk size 64" >&2
for D in $DIMS; do
  for T in $SEQS; do
    # B x Hv = 1 (one head) and 2 (two value heads of one key head).
    shapes="1,$T,1,1,$D,$D;1,$T,1,2,$D,$D"
    echo "  K = V = $D, T = $T" >&2
    OMP_NUM_THREADS=$THREADS "$BIN" --json --shapes "$shapes" --pieces "$PIECES" --reps "$REPS" \
      --scan-only | tee -a "$OUT"
  done
done
python3 - "$OUT" <<'EOF'
import json, sys
rows, speed, scans = {}, {}, {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    s = d["shape"]
    key = (s["K"], s["T"], s["B"] * s["Hv"])
    if "mode" in d:
        rows.setdefault(key, {}).setdefault(d["variant"], {})[d["mode"]] = d["median_ms"]
    elif "speedup_fwd" in d:
        speed.setdefault(key, {})[d["variant"]] = (d["speedup_fwd"], d["speedup_fwd_bwd"])
    elif "scan_only" in d:
        scans.setdefault(key, {}).setdefault(d["pieces"], {})[d["scan_only"]] = d["median_ms"]
print()
print("%4s %6s %5s | %-20s | %9s %9s | %8s %8s" %
      ("K=V", "T", "B*Hv", "variant", "fwd ms", "f+b ms", "x fwd", "x f+b"))
for key in sorted(rows):
    for v, ms in rows[key].items():
        sp = speed.get(key, {}).get(v, (1.0, 1.0))
        print("%4d %6d %5d | %-20s | %9.1f %9.1f | %8.2f %8.2f" %
              (*key, v, ms["fwd"], ms["fwd_bwd"], sp[0], sp[1]))
    print()
print("best speedup per shape (over S and scan):")
for key in sorted(speed):
    bf = max(speed[key].items(), key=lambda kv: kv[1][0])
    bb = max(speed[key].items(), key=lambda kv: kv[1][1])
    print("  K=V=%d T=%d B*Hv=%d: fwd %.2fx (%s), fwd+bwd %.2fx (%s)" %
          (*key, bf[1][0], bf[0], bb[1][1], bb[0]))
print()
print("the piece scans alone (phase 2 of the forward, S - 1 pairs), ms:")
print("%4s %6s %5s | %4s | %9s %9s" % ("K=V", "T", "B*Hv", "S", "serial", "log_depth"))
for key in sorted(scans):
    for S, ms in sorted(scans[key].items()):
        print("%4d %6d %5d | %4d | %9.3f %9.3f" %
              (*key, S, ms.get("serial", float("nan")), ms.get("log_depth", float("nan"))))
EOF
