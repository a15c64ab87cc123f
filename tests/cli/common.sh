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
