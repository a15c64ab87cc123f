#!/usr/bin/env bash
# The static SASS table of docs/gpu.md: instructions per tensor-core mma (HMMA) in the
# innermost mma loops of every kernel of a CUDA build (scripts/sass_table.py says how it is
# counted). Installs cuobjdump where it is missing (the pinned nvidia-cuda-cuobjdump wheel
# from PyPI, into .venv-tools/sass, ignored by git; no GPU needed), then reads BINARY
# (default build/apps/gdn_train, which links every kernel; build it with scripts/build.sh on
# a machine with the CUDA toolkit).
#
#   scripts/sass_table.sh [BINARY] [--filter REGEX] [--json] [--loops]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/help.sh
case "${1:-}" in -h | --help) print_help "$0"; exit 0 ;; esac
BIN=build/apps/gdn_train
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then BIN=$1; shift; fi
WHEEL=nvidia-cuda-cuobjdump==13.5.37
DIR=.venv-tools/sass
OBJ=$DIR/nvidia/cu13/bin/cuobjdump
if [ ! -x "$OBJ" ]; then
  echo "sass_table.sh: installing $WHEEL into $DIR" >&2
  python3 -m pip install --no-deps --disable-pip-version-check -q --target "$DIR" "$WHEEL" >&2
fi
[ -f "$BIN" ] || { echo "sass_table.sh: $BIN is missing: build it first (scripts/build.sh)" >&2; exit 1; }
if ! "$OBJ" -lelf "$BIN" 2>/dev/null | grep -c "sm_90" >/dev/null; then
  echo "sass_table.sh: $BIN holds no sm_90 machine code (a CPU-only build?)" >&2
  exit 1
fi
python3 scripts/sass_table.py "$BIN" --cuobjdump "$OBJ" "$@"
