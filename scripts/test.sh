#!/usr/bin/env bash
# Builds (scripts/build.sh) and runs the whole test suite: unit tests, MPI tests under
# mpirun, and the gdn_kernel command-line tests.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
case "${1:-}" in
  -h | --help) print_help "$0"; exit 0 ;;
  "") ;;
  *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${GDN_BUILD_DIR:-build}" --output-on-failure
