#!/usr/bin/env bash
# The whole training step against transformers' eager PyTorch on the same CPU, side by side
# in one run: builds (scripts/build.sh; --no-build skips it), then alternates, for --rounds
# rounds, gdn_train (one rank with --threads cores of its own, --profile on) and
# scripts/bench_step_torch.py (transformers' model of the same config, the same step:
# forward, loss with the router's, backward, clipping, AdamW) on the same thread count,
# keeping each side's best mean step time of a round (the first step of a run is left out:
# first touches and warm-up). Prints ms per step, tokens/s, torch / ours, GFLOP/s by
# gdn_plan's FLOP count of the config, and percent of the FMA peak and of the GEMM ceiling
# that gdn_bench measures in the same run; then our profile of the best round (wall time
# by component, core/profile.h). With --bf16 both sides also run their bf16 mixed
# precision, reported beside: gdn_train --dtype bf16 and torch under
# torch.autocast("cpu", torch.bfloat16).
# The venv (torch and transformers) is --venv DIR or $GDN_VENV; without one it says so
# and prints our side only.
#
#   scripts/bench_step.sh [--no-build] [--config configs/bench-step.json] [--threads 2]
#                         [--steps 4] [--rounds 2] [--venv DIR] [--bf16]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
. scripts/lib/torch_venv.sh
. scripts/lib/mpi.sh
BUILD=1 CONFIG=configs/bench-step.json THREADS=2 STEPS=4 ROUNDS=2 VENV=${GDN_VENV:-} BF16=0
parse_args "$0" --no-build BUILD=0 --config CONFIG --threads THREADS --steps STEPS \
  --rounds ROUNDS --venv VENV --bf16 BF16=1 -- "$@"
[ "$STEPS" -ge 2 ] || { echo "bench_step.sh: --steps must be at least 2 (the first is left out)" >&2; exit 2; }
[ "$BUILD" -eq 1 ] && bash scripts/build.sh gdn_train gdn_plan gdn_bench >/dev/null
for app in gdn_train gdn_plan gdn_bench; do
  [ -x "$BIN/$app" ] || { echo "bench_step.sh: $BIN/$app is missing (build first, or drop --no-build)" >&2; exit 1; }
done

TORCH=1
torch_venv_usable "$VENV" || TORCH=0

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$BIN/gdn_plan" --config "$CONFIG" --json >"$WORK/plan.json"
for r in $(seq "$ROUNDS"); do
  # The peak and the ceiling each round, beside the steps (a tiny op shape: only its lines
  # of peak and ceiling are used).
  OMP_NUM_THREADS=$THREADS "$BIN/gdn_bench" --json --shapes "1,64,1,1,16,16" --reps 1 \
    --cpu-reps 1 --skip-recurrent-above 0 >>"$WORK/bench.jsonl"
  for dt in f32 $([ "$BF16" -eq 1 ] && echo bf16); do
    mpi_run 1 "$THREADS" gdn_train --config "$CONFIG" --steps "$STEPS" --profile --dtype "$dt" \
      --log "$WORK/ours-$dt-$r.jsonl" >"$WORK/ours-$dt-$r.out" 2>&1 ||
      { cat "$WORK/ours-$dt-$r.out" >&2; exit 1; }
  done
  if [ "$TORCH" -eq 1 ]; then
    for dt in f32 $([ "$BF16" -eq 1 ] && echo bf16); do
      OMP_NUM_THREADS=$THREADS "$VENV/bin/python" scripts/bench_step_torch.py --config "$CONFIG" \
        --steps "$STEPS" --threads "$THREADS" --dtype "$dt" 2>/dev/null >>"$WORK/torch.jsonl"
    done
  fi
done

python3 - "$WORK" "$ROUNDS" "$THREADS" "$CONFIG" <<'PY'
import glob, json, statistics, sys
work, rounds, threads, config = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
plan = json.load(open(f"{work}/plan.json"))
flops = plan["flops"]["step"]["total"]
peaks, ceilings, cpu = [], [], "unknown CPU"
for line in open(f"{work}/bench.jsonl"):
    if line.startswith("{"):
        r = json.loads(line)
        if "fma_peak" in r:
            peaks.append(r["fma_peak"]["gflops"])
            cpu = f'{r["fma_peak"].get("cpu", cpu)}; compiled for {r["fma_peak"].get("compiled_isa", "?")}'
        if "gemm_ceiling" in r: ceilings.append(r["gemm_ceiling"]["ceiling_gflops"])
peak, ceiling = max(peaks), max(ceilings)
ours, logs, tokens = {}, {}, 0  # per dtype: the best round's mean step and its log
for path in sorted(glob.glob(f"{work}/ours-*.jsonl")):
    dt = path.split("/")[-1].split("-")[1]
    steps = [json.loads(l) for l in open(path)]
    ms = statistics.mean(s["step_ms"] for s in steps[1:])
    tokens = steps[0]["tokens"]
    if dt not in ours or ms < ours[dt]:
        ours[dt], logs[dt] = ms, steps
best, best_log = ours["f32"], logs["f32"]
torch = {}
try:
    runs = {}
    for line in open(f"{work}/torch.jsonl"):
        r = json.loads(line)
        runs.setdefault(r["dtype"], []).append(r)
    for dt, rs in runs.items():
        # Each run's steps 1.. (its step 0 left out), the best run's mean.
        means, cur = [], []
        for r in rs:
            if r["step"] == 0 and cur:
                means.append(statistics.mean(cur)); cur = []
            if r["step"] > 0: cur.append(r["ms"])
        if cur: means.append(statistics.mean(cur))
        torch[dt] = min(means)
except FileNotFoundError:
    pass
print(f"{config}: {flops / 1e9:.0f} GFLOP per step (gdn_plan), {tokens} tokens, {threads} threads, "
      f"best of {rounds} alternating rounds")
print(f"CPU {cpu}")
print(f"FMA peak {peak:.1f} GFLOP/s, GEMM ceiling {ceiling:.1f} GFLOP/s (gdn_bench, same run)")
hdr = f"{'side':<28} | {'ms/step':>8} | {'tokens/s':>8} | {'GFLOP/s':>7} | {'% peak':>6} | {'% ceil':>6} | {'vs ours':>7}"
print(hdr)
print("-" * len(hdr))
def row(name, ms):
    gf = flops / (ms / 1e3) / 1e9
    print(f"{name:<28} | {ms:8.1f} | {tokens / (ms / 1e3):8.0f} | {gf:7.1f} | {100 * gf / peak:6.1f} | "
          f"{100 * gf / ceiling:6.1f} | {ms / best:7.2f}")
row("gdn-cp f32", best)
if "bf16" in ours: row("gdn-cp bf16", ours["bf16"])
if "f32" in torch: row("transformers eager f32", torch["f32"])
if "bf16" in torch: row("transformers autocast bf16", torch["bf16"])
mean = {}
for s in best_log[1:]:
    for k, v in s.get("profile", {}).items():
        mean[k] = mean.get(k, 0) + v / (len(best_log) - 1)
total = sum(mean.values())
print(f"our f32 profile, best round, mean of steps 2-{len(best_log)} (ms per step, % of the step):")
for k, v in sorted(mean.items(), key=lambda kv: -kv[1]):
    if v >= 0.05:
        print(f"  {k:<32} {v:9.1f} {100 * v / total:6.1f}%")
PY
