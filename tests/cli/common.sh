# Shared by the command-line test scripts (sourced): mpirun flags, one thread per rank,
# and the pass/fail counter whose closing line ctest's caller reads.
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
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$3" &&
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
# processes are killed and which is removed when the test exits, however it exits.
make_work_dir() {
  WORK=$(mktemp -d)
  export TMPDIR="$WORK"
  trap 'kill_work_processes; rm -rf "$WORK"' EXIT
  trap 'exit 1' INT TERM HUP
}
