#!/usr/bin/env bash
# scripts/plot_run.py on gdn_train logs, one case per ctest entry:
#
#   runs    two tiny runs (f32, and bf16 with --lr-schedule wsd), 3 steps each, logged, then
#           drawn together: exit 0, a PNG of 1200 x 1000 pixels (its IHDR) that names both
#           runs in its closing line; one run alone too
#   errors  a log that is not JSON (the file and line), one without a step record, a missing
#           file, no --out: exit non-zero, one line naming the problem, no traceback
#
# matplotlib comes from the tools' venv .venv-tools/ (scripts/lib/tools_venv.sh, made by
# scripts/setup.sh); where it is missing the test makes it, and exits 77 (skip), saying
# why, only when it cannot (no PyPI).
#
#   test_plot.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
source "$SRC/scripts/lib/tools_venv.sh"
VENV=$(tools_venv_dir)
if ! tools_venv_plots_ok "$VENV"; then
  if ! why=$(tools_venv_make_plots "$VENV"); then
    echo "SKIP: $why"
    exit 77
  fi
  echo "$VENV was missing: ready now (matplotlib==$TOOLS_VENV_MATPLOTLIB)"
fi
PY=$VENV/bin/python
PLOT=$SRC/scripts/plot_run.py
make_work_dir

# png_size FILE: "W H" from the PNG's IHDR chunk (bytes 16..23, big-endian).
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4, $5 * 16777216 + $6 * 65536 + $7 * 256 + $8 }'; }

case_runs() {
  local train=("$MPIRUN" "${MPI_FLAGS[@]}" -np 1 "$TRAIN" --config "$SRC/configs/tiny-qwen3-next.json"
    --seq-len 34 --steps 3 --device cpu --peak-tflops 0.01)
  if ! "${train[@]}" --log "$WORK/f32.jsonl" >"$WORK/f32.out" 2>&1 ||
    ! "${train[@]}" --dtype bf16 --lr-schedule wsd --log "$WORK/bf16.jsonl" >"$WORK/bf16.out" 2>&1; then
    tail -5 "$WORK"/*.out
    fail "runs: gdn_train failed"
    return
  fi
  if "$PY" "$PLOT" "$WORK/f32.jsonl" "$WORK/bf16.jsonl" --out "$WORK/two.png" --title "two runs" \
    >"$WORK/two.out" 2>&1 && grep -q "wrote $WORK/two.png (2 runs)" "$WORK/two.out" &&
    [ "$(png_size "$WORK/two.png")" = "1200 1000" ]; then
    pass "runs: two logs drawn into one 1200 x 1000 PNG"
  else
    cat "$WORK/two.out"
    fail "runs: two logs were not drawn (size: $(png_size "$WORK/two.png" 2>/dev/null))"
  fi
  if "$PY" "$PLOT" "$WORK/f32.jsonl" --out "$WORK/one.png" >"$WORK/one.out" 2>&1 &&
    grep -q "(1 run)" "$WORK/one.out" && [ -s "$WORK/one.png" ]; then
    pass "runs: one log drawn"
  else
    cat "$WORK/one.out"
    fail "runs: one log was not drawn"
  fi
}

# refused NAME WANT ARGS...: plot_run.py exits non-zero, its output names WANT and holds no
# traceback.
refused() {
  local name=$1 want=$2
  shift 2
  if "$PY" "$PLOT" "$@" >"$WORK/$name.out" 2>&1; then
    fail "errors: $name: exit 0"
  elif grep -q "Traceback" "$WORK/$name.out" || ! grep -qF -- "$want" "$WORK/$name.out"; then
    cat "$WORK/$name.out"
    fail "errors: $name: no one-line message naming '$want'"
  else
    pass "errors: $name: $(tail -1 "$WORK/$name.out")"
  fi
}

case_errors() {
  printf '{"step": 0, "loss": 5.0, "lr": 0.001, "tokens": 10, "step_ms": 5}\nnot json\n' >"$WORK/bad.jsonl"
  printf '{"something": 1}\n' >"$WORK/nostep.jsonl"
  refused not_json "$WORK/bad.jsonl line 2 is not JSON" "$WORK/bad.jsonl" --out "$WORK/x.png"
  refused no_step "holds no step record" "$WORK/nostep.jsonl" --out "$WORK/x.png"
  refused missing "no log file '$WORK/none.jsonl'" "$WORK/none.jsonl" --out "$WORK/x.png"
  refused no_out "--out" "$WORK/bad.jsonl"
}

run_case
