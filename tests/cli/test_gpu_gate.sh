#!/usr/bin/env bash
# On a machine without a GPU, the GPU tests' two switches (tests/gpu_gate.h) do what they
# say: a serial GPU test binary skips (77) by default and fails (1) with
# GDN_TEST_NEEDS_GPU=1; an MPI test binary runs by default, skips with GDN_TEST_GPU_ONLY=1
# and fails with GDN_TEST_NEEDS_GPU=1. Skipped itself (77) where a GPU is visible.
#
#   test_gpu_gate.sh SERIAL_GPU_TEST MPI_TEST MPIEXEC
set -uo pipefail
SERIAL=$1 MPI_TEST=$2 MPIRUN=$3
source "$(dirname "$0")/common.sh"
if nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: a GPU is visible here"
  exit 77
fi
expect() {  # expect NAME CODE CMD...: CMD exits with CODE
  local name=$1 want=$2
  shift 2
  timeout 120 "$@" >/dev/null 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] && pass "$name: exit $rc" || fail "$name: exit $rc, expected $want"
}
expect "serial GPU test, no switch" 77 env -u GDN_TEST_NEEDS_GPU "$SERIAL"
expect "serial GPU test, GDN_TEST_NEEDS_GPU=1" 1 env GDN_TEST_NEEDS_GPU=1 "$SERIAL"
MPI=("$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$MPI_TEST" "~[gpu]")
expect "MPI test, no switch (runs)" 0 env -u GDN_TEST_NEEDS_GPU -u GDN_TEST_GPU_ONLY "${MPI[@]}"
expect "MPI test, GDN_TEST_GPU_ONLY=1" 77 env GDN_TEST_GPU_ONLY=1 "${MPI[@]}"
expect "MPI test, GDN_TEST_NEEDS_GPU=1" 1 env GDN_TEST_NEEDS_GPU=1 "${MPI[@]}"
finish
