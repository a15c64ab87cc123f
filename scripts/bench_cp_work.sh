#!/usr/bin/env bash
# Per-rank work under context parallelism: the same global batch trained at cp = 1 and
# cp = 4 (one thread per rank), and the CPU time (user + system) each rank spent in the
# steps (getrusage; this VM has no hardware counters, so perf stat cannot count
# instructions). Ideal is 1/4; the GDN layers' phase-1 pass (the transition pairs) and the
# attention layers' triangle add to it. CPU time still varies with what the neighbours on
# a shared host do, so cp = 1 and cp = 4 alternate --reps times and the least of each is
# kept (the least disturbed). Configs without attention layers run one balance only.
# Prints  config | balance | cp=1 CPU s | cp=4 max rank CPU s | mean | ratio (max / cp=1).
#
#   scripts/bench_cp_work.sh [--seq-len 8192] [--steps 3] [--reps 2] [--config FILE]...
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
SEQ=8192 STEPS=3 REPS=2 CONFIGS=()
parse_args "$0" --seq-len SEQ --steps STEPS --reps REPS --config CONFIGS+ -- "$@"
[ "${#CONFIGS[@]}" -gt 0 ] || CONFIGS=(configs/bench-memory.json configs/tiny-qwen3-next.json)
bash scripts/build.sh gdn_train >/dev/null
. scripts/lib/mpi.sh
cpu() {  # cpu NP BALANCE CONFIG: "max mean" CPU seconds per rank in the steps
  mpi_run "$1" 1 gdn_train --config "$3" --cp "$1" --dp 1 --batch 1 --seq-len "$SEQ" --steps "$STEPS" --attention-load-balance "$2" \
    --watchdog-s 0 2>&1 | grep "CPU time in the steps" |
    sed -E 's/.*max ([0-9.]+) s, mean ([0-9.]+) s.*/\1 \2/'
}
echo "seq_len $SEQ, batch 1, $STEPS steps, one thread per rank, least of $REPS alternating runs: CPU time per rank in the steps"
printf "%-28s | %11s | %9s | %14s | %15s | %6s\n" config balance "cp=1 s" "cp=4 max s" "cp=4 mean s" ratio
least() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }
for c in "${CONFIGS[@]}"; do
  balances="none"
  grep -q '"full_attention' "$c" && balances="none layer_local"
  for lb in $balances; do
    one="" fmax="" fmean=""
    for ((rep = 0; rep < REPS; rep++)); do
      read -r o _ < <(cpu 1 "$lb" "$c")
      read -r m a < <(cpu 4 "$lb" "$c")
      one=$(least "$one" "$o")
      if [ -z "$fmax" ] || awk -v x="$m" -v y="$fmax" 'BEGIN { exit !(x < y) }'; then fmax=$m fmean=$a; fi
    done
    printf "%-28s | %11s | %9.3f | %14.3f | %15.3f | %6.3f\n" "$(basename "$c")" "$lb" "$one" \
      "$fmax" "$fmean" "$(awk -v a="$fmax" -v b="$one" 'BEGIN { print a / b }')"
  done
done
