# Runs of gdn_train for the test scripts that start, signal and inspect them (sourced
# after common.sh and case_args): foreground and background runs, waits, checks, and lock
# files as another run would have left them. Expects $WORK, $MPIRUN, $TRAIN, $SMALL.
MPI_EXTRA=()  # more mpirun flags for the next run (-x VAR=value)
ON_HOST=""    # when set, the next runs see this host name (a UTS namespace: another node)
# on_host CMD...: CMD, under $ON_HOST's name when it is set.
on_host() {
  if [ -n "$ON_HOST" ]; then
    unshare -u bash -c 'hostname "$0" && exec "$@"' "$ON_HOST" "$@"
  else
    "$@"
  fi
}
# run NP SECS OUT ARGS...: gdn_train under mpirun in the foreground; exit code in $rc.
run() {
  local np=$1 secs=$2 out=$3
  shift 3
  on_host timeout "$secs" "$MPIRUN" "${MPI_FLAGS[@]}" "${MPI_EXTRA[@]}" -np "$np" "$TRAIN" "$@" \
    >"$out" 2>&1
  rc=$?
}
# start NP OUT ARGS...: the same in the background; its pid (timeout's, mpirun's parent) in
# $bg.
start() {
  local np=$1 out=$2
  shift 2
  local cmd=(timeout 300 "$MPIRUN" "${MPI_FLAGS[@]}" "${MPI_EXTRA[@]}" -np "$np" "$TRAIN" "$@")
  # Not through on_host's function: $! must be timeout itself (unshare and bash exec it).
  if [ -n "$ON_HOST" ]; then
    unshare -u bash -c 'hostname "$0" && exec "$@"' "$ON_HOST" "${cmd[@]}" >"$out" 2>&1 &
  else
    "${cmd[@]}" >"$out" 2>&1 &
  fi
  bg=$!
}
# wait_for SECS CMD...: polls CMD every 0.1 s; 1 when SECS pass first.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}
# none_left PATTERN: no process's command line holds PATTERN (pgrep leaves itself out;
# a `bash -c` holding the pattern would not be).
none_left() { ! pgrep -f -- "$1" >/dev/null; }
logged() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }
check() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}
ok_run() {  # ok_run NAME OUT: the last run succeeded
  if [ "$rc" -eq 0 ]; then return 0; fi
  cat "$2"
  fail "$1: the run failed (exit $rc)"
  return 1
}
# said_once NAME PHRASE FILE: FILE holds PHRASE exactly once.
said_once() {
  local n
  n=$(grep -cF -- "$2" "$3")
  if [ "$n" -eq 1 ]; then pass "$1"; else cat "$3"; fail "$1: '$2' seen $n times (expected 1)"; fi
}
# file_losses LOG: the "step loss" lines of a gdn_train --log.
file_losses() { jq -r '"\(.step) \(.loss)"' "$1" 2>/dev/null; }
# The last rank's gdn_train process (its pid) among those whose command line holds $1.
last_rank_pid() { rank_pid gdn_train "$1" "$(($2 - 1))"; }

# take_run NP FLAGS DIR ARGS...: a 1-step run on DIR (its lock prepared by the caller)
# with --lock-stale-s 5; output in $WORK/take.out, exit code in $rc.
take_run() {
  local np=$1 flags=$2 dir=$3
  shift 3
  # shellcheck disable=SC2086
  run "$np" 120 "$WORK/take.out" "${SMALL[@]}" $flags --steps 1 --checkpoint-dir "$dir" \
    --lock-stale-s 5 "$@"
}
# fake_lock DIR HOST PID JOB AGE_S [STALE_S]: a checkpoint directory's lock file as
# another run would have left it (STALE_S: the bound it records, none when absent).
fake_lock() {
  mkdir -p "$1"
  printf '{"host":"%s","pid":%s,"start_ticks":1,"job":"%s","since":"2026-01-01T00:00:00Z","token":"x"%s}\n' \
    "$2" "$3" "$4" "${6:+,\"stale_s\":$6}" >"$1/gdn-run.lock"
  touch -d "-$5 seconds" "$1/gdn-run.lock"
}
