#!/usr/bin/env bash
# The failure-handling cases a user meets (docs/design.md §8), one ctest entry each:
#   bash tests/cli/test_reliability.sh <bin dir> <mpirun> <source dir> <case>
# Cases: nonfinite, resume_config, flag_checks, startup_paths, retention, kernel_inputs,
# kernel_outputs, watchdog, memory, messages, export_path, checkpoint_reuse,
# rotation_foreign, size_overflow, watchdog_silent, eval_tokens, resume_dtype, resume_log.
# Each runs the real tools under mpirun and checks what a user sees: the exit code, that
# nothing hangs, the message (once), and the files left behind. Helpers that read .npy files and checkpoints: npy_tool.py.
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
TOOL="python3 $(dirname "$0")/npy_tool.py"
CONFIG="$SRC/configs/tiny.json"
make_work_dir

# run NP TIMEOUT TOOL ARGS...: the tool under mpirun; output in $WORK/out, exit code in $rc.
run() {
  local np=$1 secs=$2 tool=$3
  shift 3
  timeout "$secs" "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$tool" "$@" >"$WORK/out" 2>&1
  rc=$?
}
# expect_failure NAME PHRASE: the last run was refused, saying PHRASE once (common.sh).
expect_failure() { expect_once "$1" "$2" "$WORK/out" "$rc"; }
# check NAME CONDITION...: pass when the command succeeds.
check() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}
# train_ok NAME NP ARGS...: a tiny run that must succeed.
train_ok() {
  local name=$1 np=$2
  shift 2
  run "$np" 120 "$TRAIN" --config "$CONFIG" "$@"
  if [ "$rc" -ne 0 ]; then
    cat "$WORK/out"
    fail "$name: the run failed (exit $rc)"
    return 1
  fi
}
ckpts() { find "$1" -maxdepth 1 -name 'ckpt-*.bin' -printf '%f\n' 2>/dev/null | sort | tr '\n' ' '; }

case "$CASE" in
  # ------------------------------------------------------------------ B1
  nonfinite)
    # lr 1e4 blows the weights up within a few steps: the run must stop at the first
    # non-finite step on every rank (exit 1, one message naming the step and a tensor),
    # and every checkpoint it left must be finite.
    D="$WORK/ckpt"
    jq '.train.lr = 1e4' "$CONFIG" >"$WORK/lr.json"
    run 2 120 "$TRAIN" --config "$WORK/lr.json" --cp 2 --steps 40 --checkpoint-every 1 \
      --checkpoint-dir "$D" --log "$WORK/log.jsonl"
    expect_failure "lr 1e4 stops at the first non-finite step" "stopping; no checkpoint was written for this step"
    check "the message names the step and the first non-finite tensor" \
      grep -qE "\] step [0-9]+: .*(gradient is|parameter) 'model\." "$WORK/out"
    check "no step was logged with a non-finite loss" \
      bash -c "! grep -q null '$WORK/log.jsonl'"
    files=$(ckpts "$D")
    check "checkpoints were written before the divergence ($files)" [ -n "$files" ]
    # shellcheck disable=SC2086
    check "every checkpoint left is finite" $TOOL ckpt-finite "$D"/ckpt-*.bin
    # --resume never loads a non-finite checkpoint, even one whose checksum is right.
    R="$WORK/resume"
    mkdir -p "$R"
    train_ok "a 2-step run with checkpoints" 2 --cp 2 --steps 2 --checkpoint-every 1 \
      --checkpoint-dir "$R" && {
      $TOOL ckpt-poison "$R/ckpt-00000002.bin" "$R/ckpt-00000009.bin"
      run 2 120 "$TRAIN" --config "$CONFIG" --cp 2 --steps 3 --resume --checkpoint-dir "$R"
      if [ "$rc" -eq 0 ] && grep -q "resumed from $R/ckpt-00000002.bin at step 2" "$WORK/out" &&
        [ "$(grep -c "skipping checkpoint $R/ckpt-00000009.bin" "$WORK/out")" -eq 1 ]; then
        pass "--resume passes over a non-finite checkpoint (warned once) and loads the newest finite one"
      else
        cat "$WORK/out"
        fail "--resume loaded a non-finite checkpoint, or did not say so once"
      fi
    }
    ;;
  # ------------------------------------------------------------------ B2
  resume_config)
    # Hk 2 x K 16 and Hk 4 x K 8 have the same parameter shapes: only the config tells.
    D="$WORK/ckpt"
    train_ok "a 2-step run with Hk = 2, K = 16" 2 --cp 2 --steps 2 --checkpoint-dir "$D" && {
      jq '.model.linear_num_key_heads = 4 | .model.linear_key_head_dim = 8' "$CONFIG" >"$WORK/other.json"
      run 2 60 "$TRAIN" --config "$WORK/other.json" --cp 2 --steps 4 --resume --checkpoint-dir "$D"
      expect_failure "resume with Hk = 4, K = 8 is refused" "was written by a different model"
      check "the message names both keys and both values" grep -q \
        "model.linear_key_head_dim: 16 vs 8; model.linear_num_key_heads: 2 vs 4" "$WORK/out"
      jq '.model.rms_norm_eps = 1e-5' "$CONFIG" >"$WORK/eps.json"
      run 2 60 "$TRAIN" --config "$WORK/eps.json" --cp 2 --steps 4 --resume --checkpoint-dir "$D"
      expect_failure "resume with another rms_norm_eps is refused" "model.rms_norm_eps: 1e-06 vs 1e-05"
      train_ok "resume with the same model at another cp" 4 --cp 4 --steps 3 --resume \
        --checkpoint-dir "$D" && check "it resumed" grep -q "resumed from" "$WORK/out"
    }
    ;;
  # ------------------------------------------------------------------ B3
  flag_checks)
    # A flag gets exactly the checks of its config key, and the message names the flag.
    for args in "--batch 0|--batch 0: expected an integer >= 1" \
      "--batch -2|--batch -2: expected an integer >= 1" \
      "--cp -1 --dp -2|: expected an integer >= 1 (the flag of train." \
      "--checkpoint-every -1|--checkpoint-every -1: expected an integer >= 0" \
      "--seq-len 0|--seq-len 0: expected an integer >= 1" \
      "--lr -1|--lr -1: expected a number >= 0"; do
      IFS='|' read -r flags phrase <<<"$args"
      # shellcheck disable=SC2086
      run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 $flags
      expect_failure "$flags" "$phrase"
      check "$flags: not blamed on the config file" bash -c "! grep -q 'in $CONFIG' '$WORK/out'"
    done
    ;;
  # ------------------------------------------------------------------ B4
  startup_paths)
    # A file as the checkpoint directory, and a directory as the log, are refused before
    # the first step, with the OS's reason.
    touch "$WORK/a_file"
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 50 --checkpoint-dir "$WORK/a_file"
    expect_failure "--checkpoint-dir is a file" "'$WORK/a_file' exists and is not a directory: Not a directory"
    check "refused before the first step" bash -c "! grep -q 'step     1/' '$WORK/out'"
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 50 --checkpoint-dir "$WORK/a_file/sub"
    expect_failure "--checkpoint-dir under a file" "cannot create checkpoint directory '$WORK/a_file/sub': Not a directory"
    mkdir -p "$WORK/log_dir"
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 50 --log "$WORK/log_dir"
    expect_failure "--log is a directory" "cannot open the log file '$WORK/log_dir' (--log): Is a directory"
    check "refused before the first step" bash -c "! grep -q 'step     1/' '$WORK/out'"
    ;;
  # ------------------------------------------------------------------ B5
  retention)
    D="$WORK/ckpt"
    train_ok "6 steps, a checkpoint every step" 2 --cp 2 --steps 6 --checkpoint-every 1 \
      --checkpoint-dir "$D" &&
      check "the newest 3 are kept by default: $(ckpts "$D")" \
        [ "$(ckpts "$D")" = "ckpt-00000004.bin ckpt-00000005.bin ckpt-00000006.bin " ]
    D="$WORK/ckpt2"
    train_ok "--keep-checkpoints 2" 2 --cp 2 --steps 5 --checkpoint-every 1 --checkpoint-dir "$D" \
      --keep-checkpoints 2 &&
      check "the newest 2 are kept: $(ckpts "$D")" \
        [ "$(ckpts "$D")" = "ckpt-00000004.bin ckpt-00000005.bin " ]
    D="$WORK/ckpt3"
    train_ok "--keep-checkpoints 0" 2 --cp 2 --steps 4 --checkpoint-every 1 --checkpoint-dir "$D" \
      --keep-checkpoints 0 && check "0 keeps all: $(ckpts "$D")" [ "$(ckpts "$D" | wc -w)" -eq 4 ]
    ;;
  # ------------------------------------------------------------------ B6
  kernel_inputs)
    kernel() {
      local np=$1
      shift
      run "$np" 60 "$KERNEL" "$@"
    }
    fresh() {  # fresh DIR ARGS...: seeded f64 inputs, h0 and cotangents
      rm -rf "$1"
      "$MAKE" --out "$1" --B 1 --T 40 --Hk 1 --Hv 2 --K 8 --V 8 --h0 --backward --seed 5 \
        --g-scale 0.1 "${@:2}" >/dev/null
    }
    # Non-finite inputs are refused by default.
    fresh "$WORK/nan"
    $TOOL set "$WORK/nan/q.npy" 11 nan
    kernel 3 --in "$WORK/nan" --out "$WORK/o"
    expect_failure "NaN in q is refused" "q.npy: element [0, 1, 0, 3] (flat index 11) is NaN"
    fresh "$WORK/inf"
    $TOOL set "$WORK/inf/k.npy" 2 inf
    kernel 3 --in "$WORK/inf" --out "$WORK/o"
    expect_failure "+Inf in k is refused" "k.npy: element [0, 0, 0, 2] (flat index 2) is +Inf"
    $TOOL set "$WORK/inf/k.npy" 2 0.5
    $TOOL set "$WORK/inf/g.npy" 3 inf
    kernel 3 --in "$WORK/inf" --out "$WORK/o"
    expect_failure "+Inf in g is refused" "g.npy: element [0, 1, 1] (flat index 3) is +Inf"
    # g = -inf forgets the state: accepted, finite outputs, the same on 1 and 3 ranks.
    fresh "$WORK/forget"
    for i in 0 30 31 47 48 79; do $TOOL set "$WORK/forget/g.npy" "$i" -inf; done
    kernel 1 --in "$WORK/forget" --out "$WORK/f1" --backward
    rc1=$rc
    kernel 3 --in "$WORK/forget" --out "$WORK/f3" --backward
    if [ "$rc1" -eq 0 ] && [ "$rc" -eq 0 ] && "$DIFF" "$WORK/f1" "$WORK/f3" --tol 1e-10 >"$WORK/diff" 2>&1 &&
      $TOOL finite "$WORK"/f1/*.npy; then
      pass "g = -inf: finite outputs and gradients, np 1 = np 3 (rel_l2 <= 1e-10)"
    else
      cat "$WORK/out" "$WORK/diff"
      fail "g = -inf: the run failed, gave non-finite values, or np 1 and np 3 differ"
    fi
    # beta in [0, 2] (fla's negative eigenvalues) is computed; beyond is refused.
    fresh "$WORK/beta"
    $TOOL set "$WORK/beta/beta.npy" 5 1.75
    kernel 1 --in "$WORK/beta" --out "$WORK/b1" --backward
    rc1=$rc
    kernel 3 --in "$WORK/beta" --out "$WORK/b3" --backward
    if [ "$rc1" -eq 0 ] && [ "$rc" -eq 0 ] && "$DIFF" "$WORK/b1" "$WORK/b3" --tol 1e-10 >/dev/null; then
      pass "beta = 1.75 is accepted, np 1 = np 3"
    else
      cat "$WORK/out"
      fail "beta = 1.75 was refused or np 1 and np 3 differ"
    fi
    $TOOL set "$WORK/beta/beta.npy" 5 2.5
    kernel 3 --in "$WORK/beta" --out "$WORK/o"
    expect_failure "beta = 2.5 is refused" "beta.npy: element [0, 2, 1] (flat index 5) is 2.5: expected beta in [0, 2]"
    # An empty cu_seqlens.npy is an error; zero-length sequences inside it are fine, and
    # their final state is their h0.
    fresh "$WORK/cu_empty"
    python3 - "$WORK/cu_empty/cu_seqlens.npy" <<'PY'
import sys
h = "{'descr': '<i8', 'fortran_order': False, 'shape': (0,), }"
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode())
PY
    kernel 3 --in "$WORK/cu_empty" --out "$WORK/o"
    expect_failure "an empty cu_seqlens.npy is refused" "holds 0 boundaries: expected at least 2"
    fresh "$WORK/zero" --cu-seqlens 0,0,14,14,27,40,40 --allow-invalid
    kernel 1 --in "$WORK/zero" --out "$WORK/z1" --backward
    rc1=$rc
    kernel 3 --in "$WORK/zero" --out "$WORK/z3" --backward
    if [ "$rc1" -eq 0 ] && [ "$rc" -eq 0 ] && "$DIFF" "$WORK/z1" "$WORK/z3" --tol 1e-10 >/dev/null &&
      $TOOL same-rows "$WORK/z1/ht.npy" "$WORK/zero/h0.npy" 0 2 5 &&
      $TOOL same-rows "$WORK/z1/dh0.npy" "$WORK/zero/dht.npy" 0 2 5; then
      pass "zero-length sequences: accepted, np 1 = np 3, their ht is their h0 and dh0 their dht"
    else
      cat "$WORK/out"
      fail "zero-length sequences were refused, or np 1 and np 3 differ, or ht != h0"
    fi
    ;;
  # ------------------------------------------------------------------ B7
  kernel_outputs)
    IN="$WORK/in"
    "$MAKE" --out "$IN" --B 1 --T 40 --Hk 1 --Hv 2 --K 8 --V 8 --backward --seed 2 >/dev/null
    O="$WORK/out_dir"
    run 2 60 "$KERNEL" --in "$IN" --out "$O" --backward
    check "a good run writes the set with stats.json" [ "$rc" -eq 0 ] && [ -f "$O/stats.json" ]
    # The disk fills up while dq.npy is written: the new o.npy must not stay next to the
    # old stats.json. (Files are written as NAME.tmp and renamed: /dev/full there.)
    rm -f "$O/o.npy"
    ln -s /dev/full "$O/dq.npy.tmp"
    run 2 60 "$KERNEL" --in "$IN" --out "$O" --backward
    expect_failure "disk full during dq.npy" "dq.npy.tmp"
    check "no stale stats.json is left" [ ! -e "$O/stats.json" ]
    check "no new o.npy is left" [ ! -e "$O/o.npy" ]
    rm -f "$O/dq.npy.tmp"
    # The disk fills up while stats.json itself is written.
    P="$WORK/out_stats"
    mkdir -p "$P"
    ln -s /dev/full "$P/stats.json"
    ln -s /dev/full "$P/stats.json.tmp"
    run 2 60 "$KERNEL" --in "$IN" --out "$P"
    expect_failure "disk full during stats.json" "No space left on device"
    check "no stats.json is left" [ ! -e "$P/stats.json" ]
    check "no o.npy is left" [ ! -e "$P/o.npy" ]
    ;;
  # ------------------------------------------------------------------ B8
  watchdog)
    # Rank 1 is stopped mid-run: rank 0 waits in a collective; its watchdog must end the
    # job after --watchdog-s with a line naming the rank and the step.
    run_bg() {
      timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$TRAIN" --config "$CONFIG" --cp 2 \
        --steps 100000 --watchdog-s 3 --log "$WORK/wd.jsonl" >"$WORK/out" 2>&1 &
      JOB=$!
    }
    run_bg
    wait_job "$JOB" 30 test -s "$WORK/wd.jsonl"  # the first step
    victim=$(rank_pid gdn_train "$WORK/wd.jsonl" 1)
    if [ ! -s "$WORK/wd.jsonl" ] || [ -z "$victim" ]; then
      cat "$WORK/out"
      fail "watchdog: the run did not start or rank 1 was not found"
    else
      signal_wait STOP 30 "$JOB" "$victim"
      kill -CONT "$victim" 2>/dev/null
      if kill -0 "$JOB" 2>/dev/null; then
        fail "watchdog: the job still runs $secs s after rank 1 was stopped"
      elif grep -qE "rank 0 made no progress for [0-9]+ s \(--watchdog-s 3\) at step [0-9]+" "$WORK/out"; then
        pass "watchdog: the job ended $secs s after rank 1 was stopped, naming rank 0 and the step"
      else
        cat "$WORK/out"
        fail "watchdog: the job ended after $secs s without the watchdog's message"
      fi
    fi
    wait "$JOB" 2>/dev/null
    ;;
  # ------------------------------------------------------------------ B9
  memory)
    # Qwen3.5-397B's shapes cannot fit on a CPU rank of this machine: refused before any
    # allocation, with the numbers, and never as a bare std::bad_alloc.
    run 2 60 "$TRAIN" --config "$SRC/configs/qwen3.5-397b-a17b.json" --cp 2 --seq-len 4096
    expect_failure "a model that cannot fit is refused" "the model does not fit: this rank needs an estimated"
    check "the message gives the parts and what is available" \
      grep -qE "parameters [0-9.]+ [GT]iB, gradients .* AdamW moments .* activations .* is available" "$WORK/out"
    check "no bad_alloc" bash -c "! grep -q bad_alloc '$WORK/out'"
    train_ok "the tiny model fits and says its estimate" 2 --cp 2 --steps 1 &&
      check "the estimate is printed" grep -q "memory per rank (estimate)" "$WORK/out"
    ;;
  # ------------------------------------------------------------------ B10
  messages)
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps abc
    expect_failure "an unparsable flag value names the flag" "--steps abc: expected an integer >= 0"
    mkdir -p "$WORK/data_dir"
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --data "$WORK/data_dir"
    expect_failure "--data DIR names the path" "data file '$WORK/data_dir' is a directory"
    jq -c . "$CONFIG" | sed 's/"seq_len":256/"seq_len":1e400/' >"$WORK/overflow.json"
    run 2 60 "$TRAIN" --config "$WORK/overflow.json" --cp 2
    expect_failure "a JSON number overflow names the file and key" "'$WORK/overflow.json': the value of 'train.seq_len' is out of range"
    # A binary .npy header: shown escaped and cut.
    IN="$WORK/in"
    "$MAKE" --out "$IN" --B 1 --T 20 --Hk 1 --Hv 1 --K 8 --V 8 >/dev/null
    python3 - "$IN/q.npy" <<'PY'
import sys
h = b"{'descr': '<f8', 'fortran_order': False, 'shape': (1, 20, 1, 8) " + bytes(range(256)) * 4
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h)
PY
    run 2 60 "$KERNEL" --in "$IN" --out "$WORK/o"
    expect_failure "a bad .npy header is reported" "q.npy: malformed header"
    check "the header is shown escaped (\\x00) and cut" grep -qF '\x00\x01\x02' "$WORK/out"
    check "no raw control bytes reach the terminal" \
      bash -c "! LC_ALL=C grep -qP '[\\x00-\\x08\\x0e-\\x1f\\x7f]' '$WORK/out'"
    check "the message is cut short" [ "$(grep -F 'malformed header' "$WORK/out" | wc -c)" -lt 600 ]
    # 64-bit shapes are reported as read: T = 2^40 (with K = 0 and Hv = 0, so the files
    # hold no data and the shape check is what answers).
    S="$WORK/huge"
    mkdir -p "$S"
    python3 - "$S" <<'PY'
import sys
def npy(path, shape):
    h = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s,), }" % ", ".join(map(str, shape))
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode())
T = 2 ** 40
for name, shape in [("q", (1, T, 1, 0)), ("k", (1, T, 1, 0)), ("v", (1, T, 0, 0)),
                    ("g", (1, T, 0)), ("beta", (1, T, 0))]:
    npy(f"{sys.argv[1]}/{name}.npy", shape)
PY
    run 2 60 "$KERNEL" --in "$S" --out "$WORK/o"
    expect_failure "T = 2^40 is reported as read" "T=1099511627776"
    # The checkpoint-skip warning prints once, not once per rank.
    D="$WORK/ckpt"
    train_ok "two checkpoints" 3 --cp 3 --steps 2 --checkpoint-every 1 --checkpoint-dir "$D" && {
      printf 'torn' >>"$D/ckpt-00000002.bin"
      run 3 60 "$TRAIN" --config "$CONFIG" --cp 3 --steps 3 --resume --checkpoint-dir "$D"
      expect_failure_or_ok() {
        local n
        n=$(grep -c "skipping checkpoint $D/ckpt-00000002.bin" "$WORK/out")
        if [ "$rc" -eq 0 ] && [ "$n" -eq 1 ] && grep -q "resumed from $D/ckpt-00000001.bin" "$WORK/out"; then
          pass "the checkpoint-skip warning prints once on 3 ranks, and the older one is loaded"
        else
          cat "$WORK/out"
          fail "the checkpoint-skip warning printed $n times (expected 1), exit $rc"
        fi
      }
      expect_failure_or_ok
    }
    ;;
  # ------------------------------------------------------------------
  export_path)
    # --export-hf is written after the last step: an unusable path must be refused at
    # start-up (once, exit 1 on every rank), not found when the trained weights are lost.
    touch "$WORK/a_file"
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 20 --export-hf "$WORK/a_file"
    expect_failure "--export-hf is a file" \
      "the --export-hf directory '$WORK/a_file' exists and is not a directory: Not a directory"
    check "exit 1 (every rank ended cleanly, no abort)" [ "$rc" -eq 1 ]
    check "refused before the first step" bash -c "! grep -q 'step     1/' '$WORK/out'"
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 20 --export-hf "$WORK/a_file/sub"
    expect_failure "--export-hf under a file" \
      "cannot create the --export-hf directory '$WORK/a_file/sub': Not a directory"
    check "refused before the first step" bash -c "! grep -q 'step     1/' '$WORK/out'"
    if [ "$(id -u)" -ne 0 ]; then  # root writes anywhere
      mkdir -p "$WORK/read_only"
      chmod 555 "$WORK/read_only"
      run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 20 --export-hf "$WORK/read_only"
      expect_failure "--export-hf not writable" \
        "the --export-hf directory '$WORK/read_only' is not writable: Permission denied"
    fi
    train_ok "a usable --export-hf" 2 --cp 2 --steps 1 --export-hf "$WORK/export" &&
      check "the export is written" [ -f "$WORK/export/model.safetensors" ] &&
      check "no probe file is left" bash -c "! compgen -G '$WORK/export/.gdn_write_probe*'"
    ;;
  # ------------------------------------------------------------------
  checkpoint_reuse)
    # A fresh run into another run's checkpoint directory would overwrite some of its
    # checkpoints and leave the rest for a later --resume: refused, unless
    # --overwrite-checkpoints, which deletes the old set first.
    D="$WORK/ckpt"
    train_ok "run A: 4 steps, checkpoints at 2 and 4" 2 --cp 2 --steps 4 --checkpoint-every 2 \
      --checkpoint-dir "$D" && {
      run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 4 --checkpoint-every 1 --seed 7 \
        --checkpoint-dir "$D"
      expect_failure "a fresh run B into run A's directory is refused, naming it" \
        "checkpoint directory '$D' (--checkpoint-dir) holds 2 checkpoints of another run"
      check "the message says what to do (--resume would refuse another seed)" grep -q -- \
        "--resume would refuse them (the newest was written by another run (checkpoint vs this run): seed 1234 vs 7; --accept-changes seed continues it): pass --overwrite-checkpoints" \
        "$WORK/out"
      check "refused before the first step" bash -c "! grep -q 'step     1/' '$WORK/out'"
      check "run A's checkpoints are untouched: $(ckpts "$D")" \
        [ "$(ckpts "$D")" = "ckpt-00000002.bin ckpt-00000004.bin " ]
      run 1 60 "$TRAIN" --help
      check "--help explains --overwrite-checkpoints" \
        bash -c "tr -s ' \n' ' ' <'$WORK/out' | grep -q -- '--overwrite-checkpoints [^[]*deletes them'"
      run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --steps 5 --resume --overwrite-checkpoints \
        --checkpoint-dir "$D"
      expect_failure "--resume with --overwrite-checkpoints is refused" \
        "--resume continues the run in the checkpoint directory and --overwrite-checkpoints"
      train_ok "run B with --overwrite-checkpoints" 2 --cp 2 --steps 2 --checkpoint-every 1 \
        --seed 7 --checkpoint-dir "$D" --overwrite-checkpoints &&
        check "only run B's checkpoints are left: $(ckpts "$D")" \
          [ "$(ckpts "$D")" = "ckpt-00000001.bin ckpt-00000002.bin " ] &&
        check "it said what it deleted" grep -q "deleted the 2 checkpoints of an earlier run in $D" "$WORK/out"
      train_ok "--resume then continues run B" 2 --cp 2 --steps 3 --resume --seed 7 \
        --checkpoint-dir "$D" &&
        check "from run B's step 2" grep -q "resumed from $D/ckpt-00000002.bin at step 2" "$WORK/out"
      train_ok "a fresh run into an empty directory is fine" 2 --cp 2 --steps 1 \
        --checkpoint-dir "$WORK/empty"
    }
    ;;
  # ------------------------------------------------------------------
  rotation_foreign)
    # Files named like checkpoints that are not this run's (random bytes, another model's
    # checkpoint) are neither counted by --keep-checkpoints nor deleted; each is named once.
    D="$WORK/ckpt"
    mkdir -p "$D"
    head -c 4096 /dev/urandom >"$D/ckpt-00000009.bin"
    train_ok "3 steps, --keep-checkpoints 1, beside random bytes named ckpt-00000009.bin" 2 \
      --cp 2 --steps 3 --checkpoint-every 1 --keep-checkpoints 1 --checkpoint-dir "$D" && {
      check "the run's newest checkpoint is kept and the random file left alone: $(ckpts "$D")" \
        [ "$(ckpts "$D")" = "ckpt-00000003.bin ckpt-00000009.bin " ]
      check "the random file is named once" [ "$(grep -c "ckpt-00000009.bin" "$WORK/out")" -eq 1 ]
      check "... as left alone by the rotation" grep -q "leaves alone a file that is not a checkpoint of this run: '$D/ckpt-00000009.bin'" "$WORK/out"
    }
    # Another model's checkpoint (Hk 4 x K 8: the same shapes) at an older step, in a
    # directory this run resumes in.
    O="$WORK/other"
    jq '.model.linear_num_key_heads = 4 | .model.linear_key_head_dim = 8' "$CONFIG" >"$WORK/other.json"
    run 2 120 "$TRAIN" --config "$WORK/other.json" --cp 2 --steps 1 --checkpoint-dir "$O"
    check "the other model's run wrote a checkpoint" [ -f "$O/ckpt-00000001.bin" ]
    R="$WORK/resume"
    train_ok "2 steps" 2 --cp 2 --steps 2 --checkpoint-every 1 --checkpoint-dir "$R" && {
      rm "$R"/ckpt-00000001.bin*
      cp "$O"/ckpt-00000001.bin* "$R/"  # the manifest and its parts
      train_ok "--resume to step 4 with --keep-checkpoints 1" 2 --cp 2 --steps 4 \
        --checkpoint-every 1 --keep-checkpoints 1 --resume --checkpoint-dir "$R" &&
        check "the other model's checkpoint is left alone: $(ckpts "$R")" \
          [ "$(ckpts "$R")" = "ckpt-00000001.bin ckpt-00000004.bin " ] &&
        check "... and named once, with the reason" \
          [ "$(grep -c "'$R/ckpt-00000001.bin' was written by a different model" "$WORK/out")" -eq 1 ]
    }
    ;;
  # ------------------------------------------------------------------
  size_overflow)
    # seq_len 2^62: batch x seq_len x width x bytes overflows int64. Refused at set-up,
    # naming the flag (or the key), by gdn_train and gdn_plan alike.
    BIG=4611686018427387904
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --seq-len $BIG
    expect_failure "gdn_train --seq-len 2^62" "--seq-len $BIG: batch_size x seq_len x"
    check "not a std::vector error" bash -c "! grep -q 'max_size\|vector' '$WORK/out'"
    check "it gives the largest seq_len that fits" grep -q "the largest seq_len whose sizes fit is [0-9]" "$WORK/out"
    timeout 60 "$PLAN" --config "$CONFIG" --cp 2 --seq-len $BIG >"$WORK/out" 2>&1
    rc=$?
    expect_failure "gdn_plan --seq-len 2^62" "--seq-len $BIG: batch_size x seq_len x"
    check "gdn_plan prints no plan" bash -c "! grep -q 'tokens per step' '$WORK/out'"
    python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c['train']['seq_len'] = 2**62; print(json.dumps(c))" \
      "$CONFIG" >"$WORK/big.json"  # (jq would round 2^62 to a double)
    timeout 60 "$PLAN" --config "$WORK/big.json" --cp 2 >"$WORK/out" 2>&1
    rc=$?
    expect_failure "train.seq_len 2^62 in the file names the key and file" \
      "train.seq_len = $BIG in $WORK/big.json: "
    # A batch that overflows with a seq_len that alone would fit names --batch.
    run 2 60 "$TRAIN" --config "$CONFIG" --cp 2 --seq-len 1099511627776 --batch 2000000000
    expect_failure "--batch 2e9 at seq_len 2^40" "--batch 2000000000: "
    # The attention layers' (query, key) pairs grow as seq_len^2.
    timeout 60 "$PLAN" --config "$SRC/configs/tiny-qwen3-next.json" --cp 2 --seq-len 4294967296 >"$WORK/out" 2>&1
    rc=$?
    expect_failure "gdn_plan: attention pairs at seq_len 2^32" \
      "--seq-len 4294967296: batch_size x seq_len (seq_len + 1) / 2 (query, key) pairs"
    timeout 60 "$PLAN" --config "$CONFIG" --cp 2 --seq-len 4096 >"$WORK/out" 2>&1
    check "an ordinary seq_len still plans" [ $? -eq 0 ]
    ;;
  # ------------------------------------------------------------------
  watchdog_silent)
    # Rank 0 (and then ranks 0 and 2) stopped mid-run: the ranks that wait for them time
    # out, and the watchdog's line must name the stopped rank(s), not the rank that noticed.
    stop_ranks() {  # stop_ranks NAME RANK...: stops those ranks of a 3-rank run
      local name=$1
      shift
      local log="$WORK/$name.jsonl" victims=() r p
      timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 3 "$TRAIN" --config "$CONFIG" --cp 3 \
        --steps 100000 --watchdog-s 3 --log "$log" >"$WORK/out" 2>&1 &
      JOB=$!
      wait_job "$JOB" 30 test -s "$log"  # the first step
      for r in "$@"; do
        p=$(rank_pid gdn_train "$log" "$r")
        [ -n "$p" ] && victims+=("$p")
      done
      if [ ! -s "$log" ] || [ "${#victims[@]}" -ne $# ]; then
        cat "$WORK/out"
        fail "$name: the run did not start or a rank was not found"
        kill "$JOB" 2>/dev/null
        wait "$JOB" 2>/dev/null
        return 1
      fi
      signal_wait STOP 30 "$JOB" "${victims[@]}"
      kill -CONT "${victims[@]}" 2>/dev/null
      if kill -0 "$JOB" 2>/dev/null; then
        fail "$name: the job still runs 30 s after the ranks were stopped"
        kill "$JOB" 2>/dev/null
        wait "$JOB" 2>/dev/null
        return 1
      fi
      wait "$JOB" 2>/dev/null
      grep '^\[watchdog\]' "$WORK/out" >"$WORK/$name.lines"
    }
    if stop_ranks rank0 0; then
      first=$(head -n 1 "$WORK/rank0.lines")
      if grep -qE "^\[watchdog\] \[error\] rank 0 is silent \(.*last seen: rank 0 at step [0-9]+, in " <<<"$first" &&
        grep -qE "rank [12] made no progress for [0-9]+ s \(--watchdog-s 3\)" <<<"$first"; then
        pass "rank 0 stopped: the first watchdog line names rank 0 as silent, then the rank that noticed: $first"
      else
        cat "$WORK/out"
        fail "rank 0 stopped: the first watchdog line does not name rank 0 as the silent rank"
      fi
      check "every watchdog line names rank 0, and only rank 0, as silent" \
        bash -c "! grep -qv '^\[watchdog\] \[error\] rank 0 is silent ' '$WORK/rank0.lines'"
    fi
    if stop_ranks rank02 0 2; then
      first=$(head -n 1 "$WORK/rank02.lines")
      if grep -qE "^\[watchdog\] \[error\] ranks 0, 2 are silent .*rank 1 made no progress" <<<"$first"; then
        pass "ranks 0 and 2 stopped: rank 1's line names both as silent: $first"
      else
        cat "$WORK/out"
        fail "ranks 0 and 2 stopped: the watchdog line does not name ranks 0 and 2"
      fi
    fi
    ;;
  # ------------------------------------------------------------------
  eval_tokens)
    # --tokens of shape [0, T + 1]: refused naming the file, not as a GDN shape inside the
    # model.
    python3 - "$WORK/empty.npy" <<'PY'
import sys
h = "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 9), }"
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode())
PY
    run 2 60 "$EVAL" --init-from "$SRC/tests/fixtures/hf/qwen3_5_dense" --tokens "$WORK/empty.npy"
    expect_failure "--tokens [0, 9] names the file and the shape" \
      "--tokens $WORK/empty.npy has shape [0, 9]: expected [B, T + 1] with B >= 1 and T >= 1"
    check "not from inside the model" bash -c "! grep -q 'invalid GDN shape' '$WORK/out'"
    ;;
  # ------------------------------------------------------------------
  resume_dtype)
    # A checkpoint of one dtype resumed into a run of the other: converted, with one
    # warning that says so.
    for pair in "f64 f32 rounded" "f32 f64 widened"; do
      read -r from to verb <<<"$pair"
      D="$WORK/ckpt_$from"
      train_ok "2 $from steps" 2 --cp 2 --steps 2 --dtype "$from" --checkpoint-dir "$D" && {
        train_ok "resumed as $to" 2 --cp 2 --steps 3 --dtype "$to" --resume --checkpoint-dir "$D"
        phrase="--resume: checkpoint $D/ckpt-00000002.bin holds $from values and this run is $to (--dtype): its parameters and AdamW moments are $verb to $to"
        n=$(grep -cF -- "$phrase" "$WORK/out")
        check "$from -> $to: one warning ($n)" [ "$n" -eq 1 ]
        check "it resumed" grep -q "resumed from $D/ckpt-00000002.bin at step 2" "$WORK/out"
        train_ok "$to again, from the $to checkpoint of step 3" 2 --cp 2 --steps 4 --dtype "$to" \
          --resume --checkpoint-dir "$D" &&
          check "the same dtype: no warning" bash -c "! grep -q 'holds .* values and this run is' '$WORK/out'"
      }
    done
    ;;
  # ------------------------------------------------------------------
  resume_log)
    # Steps logged after the last checkpoint run again on --resume: the log must hold each
    # step once. (1) As if a SIGTERM came after step 4 was logged, before its checkpoint,
    # mid-way through the next line.
    L="$WORK/log.jsonl"
    D="$WORK/ckpt"
    train_ok "4 steps, checkpoints at 2 and 4" 2 --cp 2 --steps 4 --checkpoint-every 2 \
      --keep-checkpoints 0 --checkpoint-dir "$D" --log "$L" && {
      rm "$D/ckpt-00000004.bin"
      head -n 2 "$L" >"$WORK/kept"
      printf '{"step":4,"lo' >>"$L"
      train_ok "--resume to step 6" 2 --cp 2 --steps 6 --checkpoint-every 2 --resume \
        --checkpoint-dir "$D" --log "$L" &&
        check "it resumed from step 2" grep -q "resumed from $D/ckpt-00000002.bin at step 2" "$WORK/out" &&
        check "the log holds steps 0..5 once each: $(jq -r .step "$L" 2>&1 | tr '\n' ' ')" \
          [ "$(jq -r .step "$L" 2>&1 | tr '\n' ' ')" = "0 1 2 3 4 5 " ] &&
        check "the lines before the checkpoint are kept as they were" \
          [ "$(head -n 2 "$L")" = "$(cat "$WORK/kept")" ] &&
        check "it said so once" [ "$(grep -c "dropped 3 lines of $L past step 2" "$WORK/out")" -eq 1 ]
    }
    # (2) A real SIGTERM to the ranks, sent while (stopped for a look) the log holds steps
    # past the newest checkpoint.
    L="$WORK/term.jsonl"
    D="$WORK/ckpt_term"
    timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$TRAIN" --config "$CONFIG" --cp 2 \
      --steps 100000 --checkpoint-every 3 --checkpoint-dir "$D" --log "$L" >"$WORK/out" 2>&1 &
    JOB=$!
    logged=0 saved=0
    for _ in $(seq 600); do  # up to 60 s
      kill -0 "$JOB" 2>/dev/null || break
      if [ -s "$L" ] && [ "$(wc -l <"$L")" -ge 4 ]; then
        ranks=$(for r in 0 1; do rank_pid gdn_train "$L" "$r"; done | tr '\n' ' ')
        # shellcheck disable=SC2086
        kill -STOP $ranks 2>/dev/null
        logged=$(wc -l <"$L")
        newest=$(find "$D" -maxdepth 1 -name 'ckpt-*.bin' | sort | tail -n 1)
        saved=$([ -n "$newest" ] && echo $((10#$(basename "$newest" .bin | sed 's/^ckpt-//'))) || echo 0)
        if [ "$saved" -gt 0 ] && [ "$logged" -gt "$saved" ]; then
          # shellcheck disable=SC2086
          kill -TERM $ranks  # delivered as they continue: not one more step
          # shellcheck disable=SC2086
          kill -CONT $ranks 2>/dev/null
          break
        fi
        # shellcheck disable=SC2086
        kill -CONT $ranks 2>/dev/null
      fi
      sleep 0.05
    done
    wait "$JOB" 2>/dev/null
    if [ "$saved" -eq 0 ] || [ "$logged" -le "$saved" ]; then
      cat "$WORK/out"
      fail "SIGTERM: the job was not caught with logged steps past a checkpoint"
    else
      n=$((logged + 2))
      # Fewer steps than the killed run's: another cosine, accepted (train/run_identity.h).
      train_ok "--resume after a SIGTERM at $logged logged steps, checkpoint at $saved" 2 --cp 2 \
        --steps "$n" --checkpoint-every 3 --resume --accept-changes schedule --checkpoint-dir "$D" \
        --log "$L" &&
        check "the log holds steps 0..$((n - 1)) once each: $(jq -r .step "$L" 2>&1 | tr '\n' ' ')" \
          [ "$(jq -r .step "$L" 2>&1 | tr '\n' ' ')" = "$(seq 0 $((n - 1)) | tr '\n' ' ')" ]
    fi
    ;;
  *)
    echo "test_reliability.sh: unknown case '$CASE'"
    exit 2
    ;;
esac
finish
