#!/usr/bin/env bash
# The CPU op against transformers' torch_chunk_gated_delta_rule (with autograd), side by
# side in one run: builds (scripts/build.sh; --no-build skips it), then runs gdn_bench and
# scripts/bench_torch_reference.py at --shapes (default: the two benchmark shapes) in f32
# on the same thread count, alternating them for --rounds rounds and keeping each variant's
# best median (a burst from a neighbour on a shared machine slows one round, not all).
# Prints a table per shape: our forward and forward + backward ms, GFLOP/s, percent of the
# FMA peak gdn_bench measured and percent of its GEMM ceiling (gdn/flop_count.h has the
# FLOP formula), the same per pass (prepare, transition = CP phase 1, output = phase 3,
# backward), the WY factors kept vs recomputed over phases 1 + 3, the torch ms and
# torch / ours. Above the table: the
# peak (one thread and all, each round) and the ceiling, the best --ceiling-size GEMM rate
# of ours, OpenBLAS's (when gdn_bench was built with it) and torch's. The venv (torch and
# transformers) is --venv DIR or $GDN_VENV; without one it says so and prints our side only.
#
#   scripts/bench_cpu_op.sh [--no-build] [--threads 2] [--reps 5] [--rounds 2] [--venv DIR]
#                           [--shapes "1,4096,4,4,128,128;2,2048,2,4,64,64"] [--ceiling-size 1024]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
. scripts/lib/torch_venv.sh
BUILD=1 THREADS=2 REPS=5 ROUNDS=2 VENV=${GDN_VENV:-} CEILING=1024
SHAPES="1,4096,4,4,128,128;2,2048,2,4,64,64"
parse_args "$0" --no-build BUILD=0 --threads THREADS --reps REPS --rounds ROUNDS --venv VENV \
  --shapes SHAPES --ceiling-size CEILING -- "$@"
BUILD_DIR=${GDN_BUILD_DIR:-build}
[ "$BUILD" -eq 1 ] && bash scripts/build.sh gdn_bench >/dev/null
BENCH=$BUILD_DIR/apps/gdn_bench
[ -x "$BENCH" ] || { echo "bench_cpu_op.sh: $BENCH is missing (build first, or drop --no-build)" >&2; exit 1; }

TORCH=1
torch_venv_usable "$VENV" || TORCH=0

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for _ in $(seq "$ROUNDS"); do
  OMP_NUM_THREADS=$THREADS "$BENCH" --json --shapes "$SHAPES" --dtype f32 --reps "$REPS" \
    --skip-recurrent-above 0 --ceiling-size "$CEILING" >>"$OUT"
  if [ "$TORCH" -eq 1 ]; then
    OMP_NUM_THREADS=$THREADS "$VENV/bin/python" scripts/bench_torch_reference.py \
      --threads "$THREADS" --shapes "$SHAPES" --reps "$REPS" --matmul-size "$CEILING" >>"$OUT"
  fi
done

python3 - "$OUT" "$THREADS" "$ROUNDS" <<'PY'
import json, sys
path, threads, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
best, peaks, ceilings, torch_mm = {}, [], [], []
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "fma_peak" in r:
        peaks.append(r["fma_peak"])
    if "gemm_ceiling" in r:
        ceilings.append(r["gemm_ceiling"])
    if "torch_matmul" in r:
        torch_mm.append(r["torch_matmul"])
    if "variant" not in r:
        continue
    s = r["shape"]
    key = (tuple(s[k] for k in ("B", "T", "Hk", "Hv", "K", "V")), r["variant"])
    if key not in best or r["median_ms"] < best[key]["median_ms"]:
        best[key] = r
def fmt(xs):
    return ", ".join(f"{x:.1f}" for x in xs)


nan = float("nan")
peak = max((p["gflops"] for p in peaks), default=nan)
print(f"f32, {threads} threads, best median of {rounds} alternating rounds")
print(f"FMA peak {peak:.1f} GFLOP/s: all threads at once, by each thread's CPU time, the best "
      f"of each round: {fmt(p['gflops'] for p in peaks)}; one thread: "
      f"{fmt(p['gflops_one_thread'] for p in peaks)}; by wall time (what neighbours left): "
      f"{fmt(p['gflops_wall'] for p in peaks)}")
ceiling = max((c["ceiling_gflops"] for c in ceilings), default=nan)
if ceilings:
    n = ceilings[0]["n"]
    ours = max(c["ours_gflops"] for c in ceilings)
    line = f"GEMM ceiling {ceiling:.1f} GFLOP/s, the best {n}^3 GEMM: ours {ours:.1f} ({100 * ours / peak:.0f}% of peak)"
    blas = [c["blas_gflops"] for c in ceilings if c.get("blas")]
    if blas:
        line += f", OpenBLAS {max(blas):.1f} ({100 * max(blas) / peak:.0f}%)"
    else:
        line += ", no OpenBLAS in this build"
    # By CPU time per thread: near the quiet rate when neighbours slow the wall clock.
    cpu = f"ours {max(c['ours_gflops_cpu'] for c in ceilings):.1f}"
    if blas:
        cpu += f", OpenBLAS {max(c['blas_gflops_cpu'] for c in ceilings if c.get('blas')):.1f}"
    line += f"; by CPU time: {cpu}"
    if torch_mm:
        t = max(m["gflops"] for m in torch_mm)
        line += f", torch.matmul {t:.1f} ({100 * t / peak:.0f}%; not in the ceiling)"
    print(line)
hdr = f"{'shape B,T,Hk,Hv,K,V':<20} | {'pass':<22} | {'ours ms':>8} | {'GFLOP/s':>7} | " \
      f"{'% peak':>6} | {'% ceil':>6} | {'torch ms':>8} | {'torch/ours':>10}"
print(hdr)
print("-" * len(hdr))
rows = [("fwd", "chunked_fwd", "torch_fwd"), ("fwd+bwd", "chunked_fwd_bwd", "torch_fwd_bwd"),
        ("phase prepare", "phase_prepare", None), ("phase transition (CP 1)", "phase_transition", None),
        ("phase output (CP 3)", "phase_output", None), ("phase backward", "phase_backward", None),
        ("CP 1+3, WY reused", "cp_fwd_reuse", None), ("CP 1+3, WY recomputed", "cp_fwd_recompute", None)]
for shape in sorted({k[0] for k in best}, key=lambda s: -s[4]):
    name = ",".join(map(str, shape))
    for label, ours, theirs in rows:
        r = best.get((shape, ours))
        if r is None:
            continue
        # % of the best peak and ceiling of all rounds: the stricter bar.
        gf = r.get("gflops", float("nan"))
        t = best.get((shape, theirs)) if theirs else None
        tms = f"{t['median_ms']:8.1f}" if t else f"{'-':>8}"
        ratio = f"{t['median_ms'] / r['median_ms']:10.2f}" if t else f"{'-':>10}"
        print(f"{name:<20} | {label:<22} | {r['median_ms']:8.2f} | {gf:7.1f} | "
              f"{100 * gf / peak:6.1f} | {100 * gf / ceiling:6.1f} | {tms} | {ratio}")
        name = ""
    a, b = best.get((shape, "cp_fwd_reuse")), best.get((shape, "cp_fwd_recompute"))
    if a and b:
        print(f"{'':<20} | {'WY recompute / reuse':<22} | {b['median_ms'] / a['median_ms']:8.2f} |")
PY
