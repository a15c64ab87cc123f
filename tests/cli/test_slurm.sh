#!/usr/bin/env bash
# scripts/slurm/gdn_train.sbatch under a real one-node Slurm (scripts/slurm/local_slurm.sh),
# one ctest entry each:
#   bash tests/cli/test_slurm.sh <bin dir> <mpirun> <source dir> <case>
# Cases:
#   sbatch_srun, sbatch_mpirun  a short job through each launcher: it completes, logs,
#                               checkpoints, and its losses equal a plain mpirun run's;
#   scancel_resume              scancel mid-run: a checkpoint at the step reached, status 75,
#                               no requeue; resubmitted, the loss curve equals an
#                               uninterrupted run's, step for step;
#   requeue                     the time-limit path (USR1 to the batch shell, as --signal
#                               sends it), through mpirun: status 75, the job requeues itself
#                               and finishes, the curve equal to an uninterrupted run's;
#   timelimit                   Slurm's own timer: --time=1 --signal=B:USR1@40; the job is
#                               signalled, checkpoints, requeues and resumes where it stopped.
# Exits 77 (skip) where Slurm cannot run: not root, no packages and no apt-get, fewer than
# 2 CPUs, or daemons that do not come up (GDN_REQUIRE_SLURM=1 makes that last a failure).
# The daemons and every process the case started end with it, also on failure or timeout.
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
CONFIG="$SRC/configs/tiny.json"
SBATCH_SCRIPT="$SRC/scripts/slurm/gdn_train.sbatch"
LOCAL_SLURM="$SRC/scripts/slurm/local_slurm.sh"
LIMIT=${GDN_SLURM_TEST_LIMIT:-240}  # seconds for the whole case, below ctest's TIMEOUT

# A short path: munge's socket lives under it (a Unix socket path holds 108 bytes).
# munged wants every directory above its socket open to all.
WORK=$(mktemp -d /tmp/gdn-slurm.XXXXXX) && chmod 755 "$WORK"
SLURM_DIR=$WORK/slurm
cleanup() {
  local pid
  trap '' INT TERM HUP  # finish cleaning up
  [ -n "${WATCH:-}" ] && kill "$WATCH" 2>/dev/null && wait "$WATCH" 2>/dev/null
  if [ "$failed" -gt 0 ]; then  # what the daemons saw
    for f in "$SLURM_DIR"/log/slurm*.log; do
      [ -f "$f" ] && { echo "----- $f (signals, last 40 lines)"; grep -iE 'signal|error|kill' "$f" | tail -n 40; }
    done
  fi
  bash "$LOCAL_SLURM" stop "$SLURM_DIR"
  for pid in $(pgrep -f -- "$WORK/" 2>/dev/null); do  # gdn_train, mpirun, srun, sbatch
    [ "$pid" != "$$" ] && kill -CONT "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
export TMPDIR="$WORK"
# The case's own deadline, before ctest's timeout SIGKILLs this shell (start_slurm's
# GDN_SLURM_OWNER stops the daemons then too). The trap runs only once the foreground
# command has ended, so this shell's children are ended as well.
(
  while kill -0 $$ 2>/dev/null; do
    if [ "$SECONDS" -ge "$LIMIT" ]; then
      echo "FAIL: $CASE: still running after $LIMIT s"
      kill -TERM $$
      pkill -TERM -P $$
      exit
    fi
    sleep 1
  done
) &
WATCH=$!

skip() { echo "SKIP: $*"; exit 77; }
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc heeds OMP_NUM_THREADS
[ "$cpus" -ge 2 ] || skip "the jobs need 2 CPUs, this host has $cpus"
# start_slurm: the cluster up, SLURM_CONF set, or the case skipped (or failed) saying why.
start_slurm() {
  local t0 rc
  t0=$(date +%s)
  GDN_SLURM_OWNER=$$ bash "$LOCAL_SLURM" start "$SLURM_DIR"
  rc=$?
  if [ "$rc" -eq 77 ]; then skip "Slurm cannot run here (above)"; fi
  if [ "$rc" -ne 0 ]; then
    [ "${GDN_REQUIRE_SLURM:-0}" = 1 ] && { fail "the local Slurm did not start"; finish; exit 1; }
    skip "the local Slurm did not start (its logs are above)"
  fi
  eval "$(bash "$LOCAL_SLURM" env "$SLURM_DIR")"
  echo "local Slurm up in $(($(date +%s) - t0)) s"
}

check() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}
# losses FILE: the step, loss and aux_loss of each line of a --log file, as written.
losses() {
  awk '{ s = ""; n = split($0, f, /[{,}]/)
         for (i = 1; i <= n; i++) if (f[i] ~ /^"(step|loss|aux_loss)":/) s = s f[i] " "
         print s }' "$1" 2>/dev/null
}
# same_curve NAME LOG REF STEPS: LOG has STEPS steps, each once, and its losses are REF's.
same_curve() {
  local name=$1 log=$2 ref=$3 steps=$4 n
  n=$(losses "$log" | wc -l)
  if [ "$n" -eq "$steps" ] && [ "$(losses "$log")" = "$(losses "$ref")" ]; then
    pass "$name: the $steps losses equal the plain mpirun run's exactly"
  else
    diff <(losses "$ref") <(losses "$log") | head -20
    fail "$name: $n steps logged (expected $steps), or losses differ from the plain run's (above)"
  fi
}
# reference ARGS...: the uninterrupted run under plain mpirun, logged to $WORK/ref.jsonl.
reference() {
  timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$TRAIN" --config "$CONFIG" --cp 2 --dp 1 \
    --log "$WORK/ref.jsonl" "$@" >"$WORK/ref.out" 2>&1 ||
    { cat "$WORK/ref.out"; fail "the plain mpirun run failed"; }
}
# submit OUT ARGS...: sbatch the shipped script (2 tasks, cp 2, sbatch options SBATCH_OPTS)
# with gdn_train flags ARGS; the job id in $JOB. The job logs to OUT (appended across
# requeues).
SBATCH_OPTS=()
submit() {
  local out=$1
  shift
  JOB=$(cd "$WORK" && sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
    --time=10 "${SBATCH_OPTS[@]}" --output="$out" "$SBATCH_SCRIPT" "$CONFIG" 2 "$@") ||
    { fail "sbatch refused the script"; finish; exit 1; }
}
field() { scontrol show job "$1" 2>/dev/null | grep -oE "(^| )$2=[^ ]*" | cut -d= -f2; }
# wait_until SECS COMMAND...: poll COMMAND every 0.2 s until it succeeds; 1 on timeout.
wait_until() {
  local end=$(($(date +%s) + $1))
  shift
  until "$@"; do
    [ "$(date +%s)" -ge "$end" ] && return 1
    sleep 0.2
  done
}
# has_stop_signals: the case needs gdn_train's graceful stop; fail (not skip) without it.
has_stop_signals() {
  grep -q -- --stop-signals <<<"$("$TRAIN" --help 2>&1)" && return
  fail "$TRAIN has no --stop-signals: graceful stopping (exit 75) is not built in"
  finish
  exit 1
}
job_gone() { [ -z "$(squeue -h -j "$1" -o %T 2>/dev/null)" ]; }
logged() { [ "$( { wc -l <"$1"; } 2>/dev/null || echo 0)" -ge "$2" ]; }

GDN_BUILD_DIR=$(cd "$(dirname "$BIN")" && pwd)
export GDN_REPO=$SRC GDN_BUILD_DIR GDN_RUN_DIR=$WORK/run
if [ "$(id -u)" -eq 0 ]; then  # the sbatch script's mpirun, as root (CI)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
CKPT=$GDN_RUN_DIR/checkpoints

case "$CASE" in
  # ------------------------------------------------------------------
  sbatch_srun | sbatch_mpirun)
    launcher=${CASE#sbatch_}
    start_slurm
    reference --steps 6
    t0=$(date +%s)
    (cd "$WORK" && GDN_LAUNCHER=$launcher timeout 150 sbatch --wait --nodes=1 \
      --ntasks-per-node=2 --cpus-per-task=1 --time=5 --output="$WORK/job.out" \
      "$SBATCH_SCRIPT" "$CONFIG" 2 --steps 6 --checkpoint-every 3 >"$WORK/sbatch.out" 2>&1)
    rc=$?
    jid=$(grep -oE '[0-9]+$' "$WORK/sbatch.out" | head -1)
    echo "the job took $(($(date +%s) - t0)) s"
    if [ "$rc" -eq 0 ] && [ "$(field "$jid" JobState)" = COMPLETED ]; then
      pass "$launcher: sbatch --wait ended 0, the job COMPLETED (exit $(field "$jid" ExitCode))"
    else
      cat "$WORK/sbatch.out" "$WORK/job.out"
      fail "$launcher: sbatch --wait ended $rc, the job $(field "$jid" JobState) (exit $(field "$jid" ExitCode))"
    fi
    check "$launcher: the log says 2 tasks, dp=1 x cp=2, and the run directory" \
      grep -q "2 tasks on 1 nodes: dp=1 x cp=2, 1 threads each, run $GDN_RUN_DIR" "$WORK/job.out"
    check "$launcher: the log holds gdn_train's closing line" \
      grep -q "done: 6 steps.* on 2 ranks (dp=1 cp=2)" "$WORK/job.out"
    check "$launcher: the log holds the status line" \
      grep -q "gdn_train exited with status 0" "$WORK/job.out"
    check "$launcher: checkpoints at steps 3 and 6" \
      test -f "$CKPT/ckpt-00000003.bin" -a -f "$CKPT/ckpt-00000006.bin"
    same_curve "$launcher" "$GDN_RUN_DIR/train.jsonl" "$WORK/ref.jsonl" 6
    ;;
  # ------------------------------------------------------------------
  scancel_resume | requeue)
    has_stop_signals
    STEPS=400
    ARGS=(--steps "$STEPS" --checkpoint-every 25)
    start_slurm
    [ "$CASE" = requeue ] && export GDN_LAUNCHER=mpirun
    submit "$WORK/job.out" "${ARGS[@]}"
    if ! wait_until 90 logged "$GDN_RUN_DIR/train.jsonl" 40; then
      cat "$WORK/job.out"
      fail "the job did not log 40 steps within 90 s (state $(field "$JOB" JobState))"
      finish
      exit 1
    fi
    if [ "$CASE" = scancel_resume ]; then
      scancel "$JOB"  # SIGTERM to every process of the job, as a user's scancel does
    else
      scancel --batch --signal=USR1 "$JOB"  # what --signal=B:USR1@300 sends
    fi
    t0=$(date +%s)
    wait_until 60 grep -qs "gdn_train exited with status" "$WORK/job.out"
    echo "gdn_train ended $(($(date +%s) - t0)) s after the signal"
    last=$(($(jq -s 'map(.step) | max' "$GDN_RUN_DIR/train.jsonl") + 1))
    stop=$(grep -oE 'preempted at step [0-9]+' "$WORK/job.out" | head -1 | grep -oE '[0-9]+$')
    if [ -n "$stop" ] && [ "$stop" -eq "$last" ]; then
      pass "preempted at step $stop, the log's last step"
    else
      cat "$WORK/job.out"
      fail "no 'preempted at step N' line, or N (${stop:-none}) is not the log's last step ($last)"
    fi
    check "a checkpoint at step $last (the last periodic one: $((last / 25 * 25)))" \
      [ -f "$CKPT/$(printf 'ckpt-%08d.bin' "$last")" ]
    check "gdn_train's status reached the job: 75" \
      grep -q "gdn_train exited with status 75" "$WORK/job.out"
    if [ "$CASE" = scancel_resume ]; then
      wait_until 60 job_gone "$JOB"
      state=$(field "$JOB" JobState) code=$(field "$JOB" ExitCode) restarts=$(field "$JOB" Restarts)
      if [ "$state" = CANCELLED ] && [ "$code" = 75:0 ] && [ "$restarts" = 0 ] &&
        ! grep -q requeueing "$WORK/job.out"; then
        pass "the job ended CANCELLED, exit code 75, not requeued"
      else
        cat "$WORK/job.out"
        fail "the job ended $state, exit code $code, $restarts restarts (expected CANCELLED, 75:0, 0)"
      fi
      submit "$WORK/job2.out" "${ARGS[@]}"
      log2=$WORK/job2.out
    else
      log2=$WORK/job.out
      if wait_until 60 grep -qs "(restart 1)" "$WORK/job.out"; then
        pass "the job requeued itself and started again $(($(date +%s) - t0)) s after the signal"
      else
        cat "$WORK/job.out"
        fail "the job was not requeued (state $(field "$JOB" JobState))"
      fi
    fi
    wait_until 90 job_gone "$JOB"
    state=$(field "$JOB" JobState) code=$(field "$JOB" ExitCode)
    if [ "$state" = COMPLETED ] && [ "$code" = 0:0 ] &&
      grep -q "resumed from $CKPT/$(printf 'ckpt-%08d.bin' "$last") at step $last" "$log2" &&
      grep -q "done: $((STEPS - last)) steps" "$log2"; then
      pass "the second run resumed at step $last and completed the $STEPS steps"
    else
      cat "$log2"
      fail "the second run ended $state, exit code $code, or did not resume at step $last"
    fi
    reference "${ARGS[@]}"
    same_curve "interrupted and resumed" "$GDN_RUN_DIR/train.jsonl" "$WORK/ref.jsonl" "$STEPS"
    ;;
  # ------------------------------------------------------------------
  timelimit)
    # Slurm checks the time limits every 30 s or so and sends the signal when it is near:
    # with a 1-minute limit and a 40 s lead, 12-30 s after the start (measured).
    has_stop_signals
    start_slurm
    SBATCH_OPTS=(--time=1 --signal=B:USR1@40)
    submit "$WORK/job.out" --steps 1000000 --checkpoint-every 1000
    t0=$(date +%s)
    if wait_until 150 grep -qs "resumed from" "$WORK/job.out"; then
      pass "signalled by the time limit, requeued and resumed $(($(date +%s) - t0)) s after submitting"
    else
      cat "$WORK/job.out"
      fail "no resume within 150 s (state $(field "$JOB" JobState), $(field "$JOB" Restarts) restarts)"
    fi
    scancel "$JOB"
    wait_until 60 job_gone "$JOB"
    stop=$(grep -oE 'SIGUSR1: preempted at step [0-9]+' "$WORK/job.out" | head -1 | grep -oE '[0-9]+$')
    check "the first run stopped on SIGUSR1 (at step ${stop:-none}) and exited 75" \
      grep -q "gdn_train exited with status 75" "$WORK/job.out"
    check "the job requeued itself" grep -q "requeueing job $JOB" "$WORK/job.out"
    check "the second run resumed at that step" \
      grep -q "resumed from $CKPT/$(printf 'ckpt-%08d.bin' "${stop:-0}") at step ${stop:-0}\$" \
      "$WORK/job.out"
    steps=$(jq .step "$GDN_RUN_DIR/train.jsonl" | sort -n)
    n=$(wc -l <<<"$steps")
    check "every step up to the last ($n) was logged once" \
      test "$(uniq <<<"$steps" | wc -l)" -eq "$n" -a "$(tail -1 <<<"$steps")" -eq $((n - 1))
    ;;
  *)
    echo "unknown case '$CASE'" >&2
    exit 2
    ;;
esac
finish
