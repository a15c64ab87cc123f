#!/usr/bin/env bash
# Loss-curve reproduction: trains the same config from the same seed at cp = 1, 2 and 4
# (one MPI rank per cp rank, dp = 1) and shows that the losses agree to float noise. By
# default it runs both tiny hybrid MoE models (configs/tiny-qwen3-next.json and
# configs/tiny-qwen3.5.json: GDN and gated attention layers, MoE MLPs, the router loss
# trained), so GDN, attention and MoE context parallelism are all in the curves.
# Prints per config the table  step | cp=1 | cp=2 | cp=4 | max diff  (max diff over the
# loss and the MoE load-balancing loss) and writes a PNG plot: the curves, and below them
# |loss(cp) - loss(cp=1)| per step on a log scale against --tol.
#
#   scripts/reproduce_loss_curves.sh [--config FILE]... [--steps N] [--dtype f32|f64|bf16]
#       [--data synthetic|FILE] [--cps "1 2 4"] [--tol 1e-4] [--out DIR]
#       [--attention-load-balance none|layer_local] [--documents none|eos]
#
# --documents eos trains packed documents (docs/usage.md): with --data data/public_domain.txt
# each line of the text is a document (the tiny configs' eos_token_id 10 is its newline).
#
# Exit code 1 when the largest difference from cp=1 exceeds --tol for any config. The
# default --tol is 1e-4 for f32, 1e-10 for f64 and 1e-2 for bf16: bf16 rounds each layout's
# float noise to bf16 differently, so layouts agree to about 2^-9 of the loss, not 2^-24
# (docs/usage.md, "bf16 mixed precision").
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
. scripts/lib/args.sh
CONFIGS=() STEPS="" DTYPE="" DATA="" CPS="1 2 4" TOL="" OUT=out/loss_curves BALANCE="" DOCS=""
parse_args "$0" --config CONFIGS+ --attention-load-balance BALANCE --documents DOCS \
  --steps STEPS --dtype DTYPE --data DATA --cps CPS --tol TOL --out OUT -- "$@"
[ "${#CONFIGS[@]}" -gt 0 ] || CONFIGS=(configs/tiny-qwen3-next.json configs/tiny-qwen3.5.json)
if [ -z "$TOL" ]; then
  case "$DTYPE" in f64) TOL=1e-10 ;; bf16) TOL=1e-2 ;; *) TOL=1e-4 ;; esac
fi

# Builds gdn_train alone (~4 min from scratch on 2 cores; the test command builds the rest),
# its stage, percent and time on stderr, its whole output in build/build.log (scripts/build.sh).
bash scripts/build.sh gdn_train
. scripts/lib/mpi.sh
EXTRA=()
[ -n "$STEPS" ] && EXTRA+=(--steps "$STEPS")
[ -n "$DTYPE" ] && EXTRA+=(--dtype "$DTYPE")
[ -n "$DATA" ] && EXTRA+=(--data "$DATA")
[ -n "$BALANCE" ] && EXTRA+=(--attention-load-balance "$BALANCE")
[ -n "$DOCS" ] && EXTRA+=(--documents "$DOCS")
status=0
for CONFIG in "${CONFIGS[@]}"; do
  name=$(basename "$CONFIG" .json)
  dir="$OUT/$name"
  mkdir -p "$dir"
  echo "==== $CONFIG"
  for cp in $CPS; do
    log="$dir/cp$cp.jsonl"
    rm -f "$log"
    echo "== cp=$cp: mpirun -np $cp gdn_train --config $CONFIG --cp $cp ${EXTRA[*]}"
    mpi_run "$cp" "$(threads_per_rank "$cp")" gdn_train \
      --config "$CONFIG" --cp "$cp" --dp 1 --log "$log" "${EXTRA[@]}" 2>&1 | sed 's/^/  /'
  done

  # One table: step, the loss at each cp, and the largest difference from cp=1 of that
  # row over the loss and the load-balancing loss (0 without MoE).
  first=$(echo "$CPS" | awk '{print $1}')
  table="$dir/losses.tsv"
  jq -r '"\(.step)\t\(.loss)\t\(.aux_loss // 0)"' "$dir/cp$first.jsonl" > "$table"
  for cp in $CPS; do
    [ "$cp" = "$first" ] && continue
    jq -r '"\(.loss)\t\(.aux_loss // 0)"' "$dir/cp$cp.jsonl" | paste "$table" - > "$table.tmp" &&
      mv "$table.tmp" "$table"
  done
  echo
  awk -v cps="$CPS" -v tol="$TOL" -v name="$name" -F'\t' '
    BEGIN { n = split(cps, c, " "); printf "%6s", "step"; for (i = 1; i <= n; i++) printf " | %12s", "cp=" c[i];
            printf " | %10s\n", "max diff"; worst = 0 }
    { printf "%6d", $1; d = 0
      for (i = 1; i <= n; i++) {
        l = $(2 * i); a = $(2 * i + 1); printf " | %12.8f", l
        x = l - $2; if (x < 0) x = -x; if (x > d) d = x
        x = a - $3; if (x < 0) x = -x; if (x > d) d = x }
      printf " | %10.3e\n", d; if (d > worst) worst = d }
    END { printf "%s: largest difference from cp=%s: %.3e (tolerance %s): %s\n", name, c[1], worst, tol,
                 worst <= tol ? "AGREE" : "DISAGREE"; exit worst <= tol ? 0 : 1 }' "$table" || status=1

  if command -v gnuplot >/dev/null; then
    # Top: the loss at each cp. They lie on top of each other, so the first is a thick line
    # and the others ever larger open points around it. Bottom: |loss(cp) - loss(first)|
    # per step on a log scale, against the tolerance; an exact 0 has no place on a log
    # scale, so it is drawn at a floor of tol * 1e-6 (the key says so). Text is drawn
    # literally (noenhanced): in gnuplot's enhanced text an underscore is a subscript.
    floor=$(awk -v t="$TOL" 'BEGIN { printf "%.0e", t * 1e-6 }')
    # The top of the log axis: 1000 x tol (room for the key above the tolerance line), or
    # 10 x the largest difference when that is higher.
    ymax=$(awk -F'\t' -v t="$TOL" '{ for (i = 4; i <= NF; i += 2) { d = $i - $2; if (d < 0) d = -d; if (d > m) m = d } }
      END { y = 1000 * t; if (10 * m > y) y = 10 * m; printf "%.3e", y }' "$table")
    colors=("#1f77b4" "#ff7f0e" "#2ca02c" "#9467bd" "#8c564b" "#e377c2")
    top="plot" bottom="plot"
    col=2 i=0
    for cp in $CPS; do
      if [ "$i" -eq 0 ]; then
        top+=" '$table' using 1:$col with lines lw 3 lc rgb 'black' title 'cp=$cp',"
      else
        c=${colors[$(((i - 1) % ${#colors[@]}))]}
        top+=" '$table' using 1:$col with points pt $((2 * i + 4)) ps $((i + 1)) lw 1.5 lc rgb '$c' title 'cp=$cp',"
        bottom+=" '$table' using 1:(d = abs(\$$col - \$2), d > $floor ? d : $floor) with linespoints pt $((2 * i + 4)) lw 1.5 lc rgb '$c' title '|loss(cp=$cp) - loss(cp=$first)|',"
      fi
      col=$((col + 2)) i=$((i + 1))
    done
    bottom+=" $TOL with lines dt 2 lw 2 lc rgb 'red' title 'tolerance $TOL',"
    bottom+=" keyentry with points pt -1 title 'a difference of 0 is drawn at $floor',"
    gnuplot <<GP
set terminal png size 900,860
set termoption noenhanced
set output '$dir/loss_curves.png'
set multiplot layout 2,1 title 'gdn-cp loss curves: $name, same seed, cp = $CPS'
set xlabel 'step'
set ylabel 'loss (nats/token)'
set key top right
set grid
${top%,}
set logscale y
set format y '%.0e'
set yrange [$floor / 3:$ymax]
set ylabel '|loss(cp) - loss(cp=$first)|'
${bottom%,}
unset multiplot
GP
    echo "plot: $dir/loss_curves.png"
  fi
  echo
done
exit $status
