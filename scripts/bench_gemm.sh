#!/usr/bin/env bash
# The linear layers' GEMM against torch's on the same CPU and threads, in one run: builds
# (scripts/build.sh; --no-build skips it), then alternates, for --rounds rounds,
# gdn_gemm_bench (every GEMM path this CPU runs, f32 and the bf16 mode's bf16 operands) and
# scripts/bench_gemm_torch.py (F.linear in float32 and bfloat16), keeping each side's best
# time per (shape, dtype, path, pass). Prints the CPU and its features, then a table of
# GFLOP/s per shape and pass: ours per path and dtype, torch's per dtype, and ours (the
# path in use) over torch's.
#
#   scripts/bench_gemm.sh [--no-build] [--threads 2] [--rounds 2] [--reps 5] [--venv DIR]
#                         [--shapes "2048,512,1024;512,512,256"]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
. scripts/lib/torch_venv.sh
BIN=${GDN_BUILD_DIR:-build}/apps
BUILD=1 THREADS=2 ROUNDS=2 REPS=5 VENV=${GDN_VENV:-}
SHAPES="2048,512,1024;2048,1024,512;2048,512,4096;512,512,256"
parse_args "$0" --no-build BUILD=0 --threads THREADS --rounds ROUNDS --reps REPS --venv VENV \
  --shapes SHAPES -- "$@"
[ "$BUILD" -eq 1 ] && bash scripts/build.sh gdn_gemm_bench >/dev/null
[ -x "$BIN/gdn_gemm_bench" ] || { echo "bench_gemm.sh: $BIN/gdn_gemm_bench is missing (build first)" >&2; exit 1; }
TORCH=1
torch_venv_usable "$VENV" || TORCH=0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for r in $(seq "$ROUNDS"); do
  OMP_NUM_THREADS=$THREADS "$BIN/gdn_gemm_bench" --shapes "$SHAPES" --reps "$REPS" >>"$WORK/all.jsonl"
  [ "$TORCH" -eq 1 ] && OMP_NUM_THREADS=$THREADS "$VENV/bin/python" scripts/bench_gemm_torch.py \
    --shapes "$SHAPES" --threads "$THREADS" --reps "$REPS" >>"$WORK/all.jsonl"
done
INUSE=$(OMP_NUM_THREADS=1 "$BIN/gdn_gemm_bench" --shapes 16,16,16 --reps 1 --paths auto --dtypes f32 |
  python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["path"])')
python3 - "$WORK/all.jsonl" "$THREADS" "$INUSE" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
threads, inuse = sys.argv[2], sys.argv[3]
best = {}
for r in rows:
    key = (r["N"], r["in"], r["out"], r["pass"], r["side"], r["path"], r["dtype"])
    best[key] = max(best.get(key, 0), r["gflops"])
cpu = next((r["cpu"] for r in rows if "cpu" in r), "?")
print(f"# CPU {cpu}; {threads} threads; GEMM path in use: {inuse}")
cols = sorted({(k[4], k[5], k[6]) for k in best}, key=lambda c: (c[0] != "ours", c[1], c[2]))
head = ["shape N,in,out", "pass"] + [f"{p} {d}" for s, p, d in cols]
torch_cols = [c for c in cols if c[0] == "torch"]
head += [f"ours/torch {d}" for d in ("f32", "bf16") if any(c[2] == d for c in torch_cols)]
print(" | ".join(head))
for shape in sorted({k[:3] for k in best}, key=lambda s: (-s[0], s[1], s[2])):
    for pas in ("forward", "backward"):
        line = [",".join(map(str, shape)), pas]
        line += [f"{best.get(shape + (pas,) + c, 0):.0f}" for c in cols]
        for d in ("f32", "bf16"):
            t = [best.get(shape + (pas,) + c, 0) for c in torch_cols if c[2] == d]
            if t:
                ours = best.get(shape + (pas, "ours", inuse, d), 0)
                line.append(f"{ours / t[0]:.2f}" if t[0] else "-")
        print(" | ".join(line))
print("GFLOP/s by the fastest of each side's runs (2 N in out per forward, twice that per backward)")
PY
