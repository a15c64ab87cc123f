#!/usr/bin/env bash
# What a run writes is its own (docs/usage.md "Checkpoints"), round 5: one case per ctest
# entry, at cp 2 (two ranks that must agree) unless a case says otherwise.
#
#   same_job       a second run of the same Slurm job on this host is refused while the
#                  first lives (a holder on this host is judged by its pid alone)
#   stale_bound    a taker on another host (a UTS namespace) with --lock-stale-s 1 is
#                  refused by a holder whose own bound is 300 s; a holder whose lock was
#                  taken over stops at its next step, exit 1, writing no checkpoint more
#   outputs        a second run on a live run's --log is refused, and so is an --export-hf
#                  inside a live run's checkpoint directory; a dead run's log is taken
#   resume_empty   --resume into a new checkpoint directory beside a log of steps is
#                  refused, naming the log and its last step; the log is untouched
#   resume_foreign --resume of a checkpoint of a newer format, or of a foreign file, is
#                  refused naming the file and both formats; of unreadable ones only, too
#   lock_kinds     a directory or a dangling link where the lock goes is refused, naming
#                  the path, and leaves nothing behind
#   export_names   an --export-hf whose staging name is too long is refused at start-up
#   export_rescue  an export that fails after training (a full file system) leaves the
#                  weights in a checkpoint, named; resuming it exports the same bytes
#   inputs         an output that is an input (--exchange-out or --log on --data, --log on
#                  --config, --export-hf over --init-from) is refused; the input is intact
#   fifo           a FIFO nobody reads as --log, or nobody writes as --config, is refused
#                  within seconds instead of hanging set-up
#   minor          --steps at or below the checkpoint's says nothing was trained; a bf16
#                  checkpoint resumed as f32 and an unused --init-from are warned about;
#                  two spellings of one data file are one; a killed save's temporaries are
#                  removed; --stop-signals none holds during set-up; a directory of another
#                  model's checkpoints is not answered with "pass --resume"
#   cores          a rank bound to one core with OMP_NUM_THREADS=2 says so, naming the
#                  fix; without OMP_NUM_THREADS it runs a thread per core of its mask
#
#   test_run_ownership.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
CONFIG=$SRC/configs/tiny-qwen3-next.json
make_work_dir
SMALL=(--config "$CONFIG" --seq-len 64 --batch 2)
source "$(dirname "$0")/train_runs.sh"

# A long run in the background on checkpoint directory $1 with log $2 (more flags after),
# waited for until it has logged 2 steps; its mpirun's parent in $bg. 1 when it did not.
start_long() {
  local dir=$1 log=$2
  shift 2
  start 2 "$WORK/long.out" "${SMALL[@]}" --cp 2 --steps 100000 --checkpoint-dir "$dir" \
    --log "$log" "$@"
  if ! wait_for 120 logged "$log" 2; then
    cat "$WORK/long.out"
    fail "the long run did not start"
    kill "$bg" 2>/dev/null
    return 1
  fi
}
stop_long() {
  pkill -KILL -f -- "--log $1" 2>/dev/null
  wait "$bg" 2>/dev/null
  wait_for 30 none_left "--log $1"
}
cp2() { run 2 "$@"; }  # cp2 SECS OUT ARGS...
newest_step() {        # newest_step DIR: the step of the newest manifest, -1 when none
  local f
  f=$(find "$1" -maxdepth 1 -name 'ckpt-*.bin' | sort | tail -1)
  [ -n "$f" ] || { echo -1; return; }
  f=${f##*/ckpt-}
  echo $((10#${f%.bin}))
}

case_same_job() {
  MPI_EXTRA=(-x SLURM_JOB_ID=900)
  start_long "$WORK/ck" "$WORK/a.jsonl" || return
  local holder
  holder=$(rank_pid gdn_train "$WORK/ck" 0)
  cp2 60 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 3 --checkpoint-dir "$WORK/ck" --resume
  expect_once "a second run of Slurm job 900 on this host is refused while the first lives" \
    "is in use by another run (host $(hostname), pid $holder, Slurm job 900" "$WORK/b.out" "$rc"
  check "the first run still runs" kill -0 "$holder"
  MPI_EXTRA=()
  stop_long "$WORK/a.jsonl"
}

case_stale_bound() {
  start_long "$WORK/ck" "$WORK/a.jsonl" --checkpoint-every 1 || return
  sleep 3  # the holder beats every 30 s: its heartbeat is now older than 1 s
  ON_HOST=other-node
  cp2 60 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 3 --checkpoint-dir "$WORK/ck" \
    --overwrite-checkpoints --lock-stale-s 1
  ON_HOST=""
  expect_once "a taker with --lock-stale-s 1 honours the holder's 300 s" \
    "after 300 s without a heartbeat (the larger of the holder's --lock-stale-s and this run's)" \
    "$WORK/b.out" "$rc"
  check "the holder's checkpoints are still there ($(newest_step "$WORK/ck"))" \
    [ "$(newest_step "$WORK/ck")" -ge 2 ]
  stop_long "$WORK/a.jsonl"
  # A holder whose lock is taken over (as a taker on another host would) stops.
  local D=$WORK/ck2
  start_long "$D" "$WORK/c.jsonl" --checkpoint-every 1 --lock-stale-s 2 || return
  local a=$bg
  printf '{"host":"other-node","pid":4242,"start_ticks":1,"job":"","since":"2026-01-01T00:00:00Z","token":"taker","stale_s":1}\n' \
    >"$D/.taker" && mv "$D/.taker" "$D/gdn-run.lock"
  wait_job "$a" 30
  wait "$a"
  local code=$?
  check "the holder exits 1 ($code)" [ "$code" -eq 1 ]
  said_once "it says its lock was taken" "is no longer this run's: another run took it over" \
    "$WORK/long.out"
  local at
  at=$(sed -n 's/.*: stopped after step \([0-9]*\) without writing.*/\1/p' "$WORK/long.out" | head -1)
  check "it names the step it stopped at ($at)" [ -n "$at" ]
  check "and wrote no checkpoint of that step or later (newest $(newest_step "$D"))" \
    [ "$(newest_step "$D")" -lt "${at:-0}" ]
  check "nor a log line of it ($(wc -l <"$WORK/c.jsonl") lines)" \
    [ "$(wc -l <"$WORK/c.jsonl")" -lt "${at:-0}" ]
  check "the taker's lock is left alone" grep -q '"token":"taker"' "$D/gdn-run.lock"
}

case_outputs() {
  start_long "$WORK/ck" "$WORK/a.jsonl" || return
  local holder
  holder=$(rank_pid gdn_train "$WORK/ck" 0)
  cp2 60 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 3 --log "$WORK/a.jsonl"
  expect_once "a second run on a live run's --log is refused, naming it" \
    "--log '$WORK/a.jsonl' is in use by another run (host $(hostname), pid $holder" \
    "$WORK/b.out" "$rc"
  cp2 60 "$WORK/c.out" "${SMALL[@]}" --cp 2 --steps 3 --export-hf "$WORK/ck/hf"
  expect_once "an --export-hf inside a live run's checkpoint directory is refused" \
    "--export-hf '$WORK/ck/hf' lies inside checkpoint directory '$WORK/ck' of another run (host" \
    "$WORK/c.out" "$rc"
  check "and nothing was made there" [ ! -e "$WORK/ck/hf" ]
  stop_long "$WORK/a.jsonl"
  cp2 60 "$WORK/d.out" "${SMALL[@]}" --cp 2 --steps 3 --log "$WORK/a.jsonl"
  ok_run "the dead run's log" "$WORK/d.out" &&
    said_once "is taken over" "taking over the lock of --log '$WORK/a.jsonl'" "$WORK/d.out" &&
    check "and released" [ ! -e "$WORK/.a.jsonl.gdn-lock" ]
}

case_resume_empty() {
  cp2 120 "$WORK/a.out" "${SMALL[@]}" --cp 2 --steps 3 --log "$WORK/l.jsonl" \
    --checkpoint-dir "$WORK/ck"
  ok_run "a 3-step run" "$WORK/a.out" || return
  local before
  before=$(md5sum <"$WORK/l.jsonl")
  cp2 60 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 6 --log "$WORK/l.jsonl" \
    --checkpoint-dir "$WORK/ckk" --resume
  expect_once "--resume into a mistyped directory beside a log of steps is refused" \
    "holds no checkpoint, but the log '$WORK/l.jsonl' (--log) holds 3 steps of a run (the last {\"step\": 2})" \
    "$WORK/b.out" "$rc"
  check "the log is untouched" [ "$(md5sum <"$WORK/l.jsonl")" = "$before" ]
  cp2 120 "$WORK/c.out" "${SMALL[@]}" --cp 2 --steps 2 --log "$WORK/new.jsonl" \
    --checkpoint-dir "$WORK/ck3" --resume
  ok_run "a first --resume with no log yet" "$WORK/c.out" &&
    pass "a first --resume with no log yet starts (the sbatch script's first submission)"
}

case_resume_foreign() {
  cp2 120 "$WORK/a.out" "${SMALL[@]}" --cp 2 --steps 2 --checkpoint-dir "$WORK/ck" \
    --log "$WORK/l.jsonl"
  ok_run "a 2-step run" "$WORK/a.out" || return
  local m=$WORK/ck/ckpt-00000002.bin
  # The header's format, as a newer gdn-cp would write it (the checksum is not redone).
  sed -i 's/"format":2/"format":3/' "$m"
  local before
  before=$(md5sum <"$WORK/l.jsonl")
  cp2 60 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 4 --checkpoint-dir "$WORK/ck" \
    --log "$WORK/l.jsonl" --resume
  expect_once "a checkpoint of a newer format is refused, never a fresh start" \
    "checkpoint '$m' has format 3; this gdn-cp reads format 2 (it was written by a newer gdn-cp)" \
    "$WORK/b.out" "$rc"
  check "the log is untouched" [ "$(md5sum <"$WORK/l.jsonl")" = "$before" ]
  check "no step ran" bash -c "! grep -q 'step     1/' '$WORK/b.out'"
  printf 'not a checkpoint at all' >"$m"
  cp2 60 "$WORK/c.out" "${SMALL[@]}" --cp 2 --steps 4 --checkpoint-dir "$WORK/ck" --resume
  expect_once "a foreign file named like a checkpoint is refused" \
    "'$m' is not a gdn-cp checkpoint (no GDNCKPT1 magic at its start)" "$WORK/c.out" "$rc"
  # Only a torn one: refused too, rather than a fresh start over it.
  cp2 120 "$WORK/d.out" "${SMALL[@]}" --cp 2 --steps 2 --checkpoint-dir "$WORK/ck2"
  ok_run "another 2-step run" "$WORK/d.out" || return
  truncate -s -20 "$WORK/ck2/ckpt-00000002.bin"
  cp2 60 "$WORK/e.out" "${SMALL[@]}" --cp 2 --steps 4 --checkpoint-dir "$WORK/ck2" --resume
  expect_once "a directory whose only checkpoint is torn is refused" \
    "none of the 1 checkpoints in '$WORK/ck2' could be loaded" "$WORK/e.out" "$rc"
}

case_lock_kinds() {
  mkdir -p "$WORK/ck/gdn-run.lock"
  cp2 60 "$WORK/a.out" "${SMALL[@]}" --cp 2 --steps 1 --checkpoint-dir "$WORK/ck"
  expect_once "a folder where the lock goes is refused, naming it" \
    "the run lock '$WORK/ck/gdn-run.lock' is a directory, not a lock file gdn-cp wrote" \
    "$WORK/a.out" "$rc"
  check "no file of the try is left" bash -c "! compgen -G '$WORK/ck/.gdn-run.lock.*'"
  mkdir -p "$WORK/ck2"
  ln -s "$WORK/nowhere" "$WORK/ck2/gdn-run.lock"
  cp2 60 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 1 --checkpoint-dir "$WORK/ck2"
  expect_once "a dangling link where the lock goes is refused, naming it" \
    "the run lock '$WORK/ck2/gdn-run.lock' is a symbolic link (to '$WORK/nowhere')" \
    "$WORK/b.out" "$rc"
  check "no file of the try is left" bash -c "! compgen -G '$WORK/ck2/.gdn-run.lock.*'"
}

case_export_names() {
  local long
  long=$WORK/$(printf 'e%.0s' $(seq 240))
  cp2 60 "$WORK/a.out" "${SMALL[@]}" --cp 2 --steps 2 --export-hf "$long"
  expect_once "an export whose staging folder's name is too long is refused at start-up" \
    "': cannot create the folder '$WORK/.$(basename "$long").gdn-export-" "$WORK/a.out" "$rc"
  check "before any step" bash -c "! grep -q 'step     1/' '$WORK/a.out'"
  check "leaving nothing beside it" bash -c "! compgen -G '$WORK/.e*.gdn-export-*'"
}

case_export_rescue() {
  mkdir -p "$WORK/small"
  # The export's file system fills up: 48 KiB take the start-up probes, not the weights.
  local cmd=(timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$TRAIN" "${SMALL[@]}" --cp 2
    --steps 2 --dtype f64 --export-hf "$WORK/small/out")
  unshare -m bash -c 'mount -t tmpfs -o size=48k tmpfs "$0" && exec "$@"' "$WORK/small" \
    "${cmd[@]}" >"$WORK/a.out" 2>&1
  rc=$?
  local safe
  safe=$(sed -n 's/.*the trained weights are safe in checkpoint \([^:]*\): to export them.*/\1/p' \
    "$WORK/a.out" | head -1)
  check "the failed export exits 1 ($rc)" [ "$rc" -eq 1 ] || cat "$WORK/a.out"
  check "and names where the weights are ($safe)" [ -n "$safe" ] && [ -f "$safe" ]
  [ -f "$safe" ] || return
  cp2 120 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 2 --dtype f64 \
    --checkpoint-dir "$(dirname "$safe")" --resume --export-hf "$WORK/out"
  ok_run "resuming the rescue checkpoint with --export-hf" "$WORK/b.out" || return
  said_once "trains nothing" "nothing to train: the run is at step 2" "$WORK/b.out"
  cp2 120 "$WORK/c.out" "${SMALL[@]}" --cp 2 --steps 2 --dtype f64 --export-hf "$WORK/ref"
  ok_run "the same run exported directly" "$WORK/c.out" &&
    check "exports the same bytes" cmp -s "$WORK/out/model.safetensors" "$WORK/ref/model.safetensors"
}

case_inputs() {
  printf 'some text to train on, line after line\n%.0s' $(seq 200) >"$WORK/d.txt"
  cp "$CONFIG" "$WORK/c.json"
  local data_sum config_sum
  data_sum=$(md5sum <"$WORK/d.txt")
  config_sum=$(md5sum <"$WORK/c.json")
  local args=(--config "$WORK/c.json" --seq-len 64 --batch 2 --cp 2 --steps 2 --data "$WORK/d.txt")
  cp2 60 "$WORK/a.out" "${args[@]}" --exchange-out "$WORK/d.txt"
  expect_once "--exchange-out on the data is refused" \
    "--exchange-out '$WORK/d.txt' is the --data file '$WORK/d.txt'" "$WORK/a.out" "$rc"
  mkdir -p "$WORK/sub"
  cp2 60 "$WORK/b.out" "${args[@]}" --log "$WORK/sub/../d.txt"
  expect_once "--log on the data, spelled otherwise, is refused" \
    "--log '$WORK/sub/../d.txt' is the --data file '$WORK/d.txt'" "$WORK/b.out" "$rc"
  cp2 60 "$WORK/c.out" "${args[@]}" --log "$WORK/c.json"
  expect_once "--log on the config is refused" \
    "--log '$WORK/c.json' is the --config file '$WORK/c.json'" "$WORK/c.out" "$rc"
  cp2 60 "$WORK/d.out" "${args[@]}" --log "$WORK/x.jsonl" --exchange-out "$WORK/x.jsonl"
  expect_once "two outputs on one file are refused" \
    "--log '$WORK/x.jsonl' and --exchange-out '$WORK/x.jsonl' are one file" "$WORK/d.out" "$rc"
  check "the data is intact" [ "$(md5sum <"$WORK/d.txt")" = "$data_sum" ]
  check "the config is intact" [ "$(md5sum <"$WORK/c.json")" = "$config_sum" ]
  cp -r "$SRC/tests/fixtures/hf/qwen3_next_moe" "$WORK/hf"
  cp2 60 "$WORK/e.out" --init-from "$WORK/hf" --seq-len 64 --batch 2 --cp 2 --steps 1 \
    --export-hf "$WORK/hf"
  expect_once "--export-hf over --init-from is refused" \
    "--export-hf '$WORK/hf' holds the --init-from input '$WORK/hf'" "$WORK/e.out" "$rc"
  check "the initial weights are intact" \
    cmp -s "$WORK/hf/model.safetensors" "$SRC/tests/fixtures/hf/qwen3_next_moe/model.safetensors"
}

case_fifo() {
  mkfifo "$WORK/log.fifo" "$WORK/config.fifo"
  local t0=$SECONDS
  cp2 60 "$WORK/a.out" "${SMALL[@]}" --cp 2 --steps 2 --log "$WORK/log.fifo"
  expect_once "a FIFO nobody reads as --log is refused" \
    "the log '$WORK/log.fifo' (--log) is a FIFO that no process reads" "$WORK/a.out" "$rc"
  cp2 60 "$WORK/b.out" --config "$WORK/config.fifo" --cp 2 --steps 2
  expect_once "a FIFO nobody writes as --config is refused" \
    "config file '$WORK/config.fifo' is a FIFO and nothing was written to it for 10 s" \
    "$WORK/b.out" "$rc"
  check "both within 40 s ($((SECONDS - t0)) s)" [ $((SECONDS - t0)) -lt 40 ]
  # A FIFO with a reader is a log like any other; one with a writer, a config (one rank:
  # each rank reads the config, and a FIFO's bytes go to one reader).
  cat "$WORK/log.fifo" >"$WORK/read.jsonl" &
  local reader=$!
  cat "$CONFIG" >"$WORK/config.fifo" &
  local writer=$!
  run 1 120 "$WORK/c.out" --config "$WORK/config.fifo" --seq-len 64 --batch 2 --steps 2 \
    --log "$WORK/log.fifo"
  kill "$reader" "$writer" 2>/dev/null
  wait "$reader" "$writer" 2>/dev/null
  ok_run "a read FIFO as --log and a written FIFO as --config" "$WORK/c.out" &&
    check "the reader got both steps" [ "$(wc -l <"$WORK/read.jsonl")" -eq 2 ]
}

case_minor() {
  cp2 120 "$WORK/a.out" "${SMALL[@]}" --cp 2 --steps 3 --dtype bf16 --checkpoint-dir "$WORK/ck"
  ok_run "a 3-step bf16 run" "$WORK/a.out" || return
  cp2 60 "$WORK/b.out" "${SMALL[@]}" --cp 2 --steps 2 --dtype bf16 --checkpoint-dir "$WORK/ck" \
    --resume
  ok_run "--resume with --steps below the checkpoint's" "$WORK/b.out" &&
    said_once "says nothing was trained" \
      "nothing to train: the run is at step 3 and train.steps is 2 (pass a larger --steps" \
      "$WORK/b.out"
  : >"$WORK/ck/ckpt-00000004.bin.part-00000.tmp"
  : >"$WORK/ck/.ckpt-00000004.bin.tmp"
  cp2 120 "$WORK/c.out" "${SMALL[@]}" --cp 2 --steps 4 --checkpoint-dir "$WORK/ck" --resume
  ok_run "a bf16 checkpoint resumed as f32" "$WORK/c.out" &&
    said_once "is warned about" "was written by a bf16 run and this run is f32" "$WORK/c.out" &&
    said_once "a killed save's temporaries are removed" \
      "removed 2 temporary files of an interrupted checkpoint save" "$WORK/c.out"
  cp2 60 "$WORK/d.out" "${SMALL[@]}" --cp 2 --steps 0
  ok_run "--steps 0" "$WORK/d.out" &&
    said_once "says nothing was trained" "nothing to train: the run is at step 0 and train.steps is 0" \
      "$WORK/d.out"
  # One data file, two spellings: the same run.
  mkdir -p "$WORK/I"
  printf 'some text to train on, line after line\n%.0s' $(seq 200) >"$WORK/I/d.txt"
  (cd "$WORK" && cp2 120 "$WORK/e.out" "${SMALL[@]}" --cp 2 --steps 2 --data ./I/d.txt \
    --checkpoint-dir "$WORK/ck2")
  ok_run "a run on ./I/d.txt" "$WORK/e.out" || return
  (cd "$WORK" && cp2 120 "$WORK/f.out" "${SMALL[@]}" --cp 2 --steps 3 --data I/d.txt \
    --checkpoint-dir "$WORK/ck2" --resume)
  ok_run "resumed on I/d.txt" "$WORK/f.out" && pass "./I/d.txt and I/d.txt are the same data"
  # --init-from with a checkpoint to resume: the checkpoint's weights, said so.
  local hf=$SRC/tests/fixtures/hf/qwen3_next_moe
  cp2 120 "$WORK/g.out" --init-from "$hf" --seq-len 64 --batch 2 --cp 2 --steps 1 \
    --checkpoint-dir "$WORK/ck3"
  ok_run "a run from --init-from" "$WORK/g.out" || return
  cp2 120 "$WORK/h.out" --init-from "$hf" --seq-len 64 --batch 2 --cp 2 --steps 2 \
    --checkpoint-dir "$WORK/ck3" --resume
  ok_run "resumed with --init-from" "$WORK/h.out" &&
    said_once "says --init-from is not used" "--init-from $hf: not used" "$WORK/h.out"
  # --stop-signals none holds from the first moment: SIGUSR1 during set-up (waiting on a
  # config FIFO) ends the run by the signal's default action, at once.
  mkfifo "$WORK/wait.fifo"
  start 1 "$WORK/sig.out" --config "$WORK/wait.fifo" --stop-signals none
  local waiter=$bg pid="" t0=$SECONDS
  for _ in $(seq 200); do
    pid=$(rank_pid gdn_train wait.fifo 0)
    [ -n "$pid" ] && break
    sleep 0.1
  done
  sleep 1
  [ -n "$pid" ] && kill -USR1 "$pid"
  wait "$waiter"
  check "with --stop-signals none, SIGUSR1 in set-up ends the run at once ($((SECONDS - t0)) s)" \
    bash -c "[ -n '$pid' ] && [ $((SECONDS - t0)) -lt 8 ] && ! grep -q 'nothing was written' '$WORK/sig.out'"
  # Another model's checkpoints: --resume would refuse them, so it is not the advice.
  cp2 60 "$WORK/i.out" --config "$SRC/configs/tiny-qwen3.5.json" --seq-len 64 --batch 2 --cp 2 \
    --steps 1 --checkpoint-dir "$WORK/ck"
  expect_once "a fresh run on another model's checkpoints is refused" \
    "--resume would refuse them (the newest was written by a different model" "$WORK/i.out" "$rc"
}

case_cores() {
  # Open MPI binds a rank of a 1-process job to one core: with OMP_NUM_THREADS=2 set, the
  # run says so once, naming the fix, and keeps the threads; without it, one thread.
  OMP_NUM_THREADS=2 timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" --bind-to core -np 1 "$TRAIN" \
    "${SMALL[@]}" --steps 1 >"$WORK/a.out" 2>&1
  rc=$?
  ok_run "two threads set on one bound core" "$WORK/a.out" &&
    said_once "is warned about, naming the fix" \
      "(OMP_NUM_THREADS=2 is set, so the threads are kept). Give each rank its cores: mpirun --map-by slot:PE=<threads> (or --bind-to none" \
      "$WORK/a.out"
  env -u OMP_NUM_THREADS timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" --bind-to core -np 1 "$TRAIN" \
    "${SMALL[@]}" --steps 1 >"$WORK/b.out" 2>&1
  rc=$?
  ok_run "no OMP_NUM_THREADS on one bound core" "$WORK/b.out" &&
    said_once "runs one thread per core it has" "1 OpenMP thread per rank; rank 0 may run on CPU " \
      "$WORK/b.out" &&
    check "without a warning" bash -c "! grep -q 'share them' '$WORK/b.out'"
}

run_case
