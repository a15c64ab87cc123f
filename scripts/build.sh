#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures build/ in Release and builds
# everything: the libraries, the apps in build/apps and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${GDN_BUILD_DIR:-build}  # another directory for side-by-side builds
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j"${GDN_JOBS:-$(nproc)}"
