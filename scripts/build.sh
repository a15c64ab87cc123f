#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures build/ in Release and builds
# everything: the libraries, the apps in build/apps and the tests.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
no_arguments "$0" "$@"
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The CUDA toolkit, where the machine has one, may not be on PATH in batch shells.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
BUILD_DIR=${GDN_BUILD_DIR:-build}  # another directory for side-by-side builds
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j"${GDN_JOBS:-$(nproc)}"
