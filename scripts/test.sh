#!/usr/bin/env bash
# Builds (scripts/build.sh) and runs the whole test suite: unit tests, MPI tests under
# mpirun, and the gdn_kernel command-line tests.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
no_arguments "$0" "$@"
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${GDN_BUILD_DIR:-build}" --output-on-failure
