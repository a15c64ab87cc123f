# Shared by the command-line test scripts (sourced): mpirun flags, one thread per rank,
# the pass/fail counter whose closing line ctest's caller reads, and the arguments and
# dispatch of the scripts that run one case per ctest entry.
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI_FLAGS+=(--allow-run-as-root)  # CI runs as root
export OMP_NUM_THREADS=1
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }
# The closing line ("N passed, M failed") and the exit status.
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
# expect_once NAME PHRASE FILE RC: a refused run. Passes when RC is non-zero but not a hang
# (124, from timeout) and FILE holds PHRASE exactly once (every rank refuses, one rank
# reports); otherwise shows FILE and fails.
expect_once() {
  local name=$1 phrase=$2 file=$3 rc=$4 n
  n=$(grep -cF -- "$phrase" "$file")
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$n" -eq 1 ]; then
    pass "$name: exit $rc, message once"
  else
    cat "$file"
    fail "$name: exit $rc (0 = accepted, 124 = hang), '$phrase' seen $n times (expected 1)"
  fi
}
# rank_pid TOOL PATTERN RANK: the pid of the TOOL process (not mpirun or timeout) of MPI
# rank RANK whose command line holds PATTERN; empty when there is none.
rank_pid() {
  local pid
  for pid in $(pgrep -f -- "$2" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || continue
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=$3" >/dev/null &&
      echo "$pid" && return
  done
}
# kill_work_processes: kills (SIGKILL) every process but this shell whose command line
# names a path under $WORK: the tools a test started and left running when it fails.
kill_work_processes() {
  local pid
  for pid in $(pgrep -f -- "$WORK/" 2>/dev/null); do
    [ "$pid" != "$$" ] && kill -KILL "$pid" 2>/dev/null
  done
}
# make_work_dir: a fresh $WORK, also $TMPDIR (the watchdog's heartbeat directories), whose
# processes are killed and which is removed (read-only folders in it too) when the test
# exits, however it exits.
make_work_dir() {
  WORK=$(mktemp -d)
  export TMPDIR="$WORK"
  trap 'kill_work_processes; chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
  trap 'exit 1' INT TERM HUP
}
# case_args BIN_DIR MPIEXEC SOURCE_DIR CASE: the arguments of a script that runs one case
# per ctest entry, as BIN, MPIRUN, SRC and CASE, and the tools' paths in BIN_DIR (TRAIN,
# EVAL, PLAN, KERNEL, MAKE, DIFF).
case_args() {
  [ "$#" -eq 4 ] || { echo "usage: $(basename "$0") BIN_DIR MPIEXEC SOURCE_DIR CASE" >&2; exit 2; }
  BIN=$1 MPIRUN=$2 SRC=$3 CASE=$4
  TRAIN=$BIN/gdn_train EVAL=$BIN/gdn_eval PLAN=$BIN/gdn_plan KERNEL=$BIN/gdn_kernel
  MAKE=$BIN/gdn_make_inputs DIFF=$BIN/gdn_npy_diff
}
# run_case: runs the function case_$CASE and finishes (the closing line and status); an
# unknown case exits 2.
run_case() {
  if ! declare -F "case_$CASE" >/dev/null; then
    echo "$(basename "$0"): unknown case '$CASE'" >&2
    exit 2
  fi
  "case_$CASE"
  finish
}
# wait_job PID SECS [CMD...]: polls every 0.1 s, for up to SECS seconds, until the process
# PID (a job started in the background) has ended or CMD, when given, succeeds (its output
# dropped). Returns 0 either way: the caller checks what it waited for.
wait_job() {
  local pid=$1 tenths=$(($2 * 10)) _
  shift 2
  for _ in $(seq "$tenths"); do
    [ "$#" -gt 0 ] && "$@" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  return 0
}
# signal_wait SIGNAL SECS JOB PID...: sends SIGNAL to the processes PID..., then waits
# (wait_job) up to SECS seconds for the background job JOB to end; how long that took, to
# 0.1 s, in $secs.
signal_wait() {
  local sig=$1 limit=$2 job=$3 t0
  shift 3
  t0=$(date +%s.%N)
  kill "-$sig" "$@"
  wait_job "$job" "$limit"
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
# mpi_tool SECS NP OUT TOOL ARGS...: TOOL on NP ranks under mpirun, killed after SECS
# seconds; stdout and stderr into OUT; its exit status.
mpi_tool() {
  local secs=$1 np=$2 out=$3 tool=$4
  shift 4
  timeout "$secs" "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$tool" "$@" >"$out" 2>&1
}
# refused_at_start NAME WANT CMD...: CMD (a gdn_train job) exits non-zero before its first
# step, with WANT in its output ($WORK/NAME.out): a pass or a fail named "refused: NAME".
refused_at_start() {
  local name=$1 want=$2
  shift 2
  if "$@" >"$WORK/$name.out" 2>&1; then
    fail "refused: $name: exit 0"
  elif grep -q "step     1/" "$WORK/$name.out" || ! grep -qF -- "$want" "$WORK/$name.out"; then
    tail -5 "$WORK/$name.out"
    fail "refused: $name: no message naming '$want' before step 1"
  else
    pass "refused: $name"
  fi
}
# same_logs FILTER A B: the JSON-lines logs A (not empty) and B agree line by line under
# the jq FILTER; jq prints a double with 17 significant digits, so that is bit for bit.
same_logs() {
  [ -s "$2" ] && cmp -s <(jq -c "$1" "$2") <(jq -c "$1" "$3")
}
# losses NAME: the "step loss" lines of the gdn_train --log $WORK/NAME.jsonl.
losses() { jq -r '"\(.step) \(.loss)"' "$WORK/$1.jsonl" 2>/dev/null; }
# pick NAME FIRST LAST: the "step loss" lines of steps FIRST..LAST.
pick() { losses "$1" | awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b'; }
# maxdiff A B [relative]: the largest |loss difference| of two "step loss" lists with the
# same steps (relative to B's losses with `relative`), or "steps differ" when the step
# columns do not match.
maxdiff() {
  paste -d ' ' <(echo "$1") <(echo "$2") | awk -v rel="${3:-}" '
    $1 != $3 || NF != 4 { bad = 1 }
    { d = $2 - $4; if (rel != "") d /= $4; if (d < 0) d = -d; if (d > m) m = d }
    END { if (bad || NR == 0) print "steps differ"; else printf "%.3g\n", m }'
}
# log_run SECS NAME NP ARGS...: gdn_train ($TRAIN) on NP ranks logging to a fresh
# $WORK/NAME.jsonl, its output in $WORK/NAME.out; shows the output and returns 1 when it
# fails.
log_run() {
  local secs=$1 name=$2 np=$3
  shift 3
  rm -f "$WORK/$name.jsonl"
  if ! mpi_tool "$secs" "$np" "$WORK/$name.out" "$TRAIN" --log "$WORK/$name.jsonl" "$@"; then
    cat "$WORK/$name.out"
    return 1
  fi
}
