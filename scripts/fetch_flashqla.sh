#!/usr/bin/env bash
# Run HERE (it reaches PyPI) before a device session: puts FlashQLA (flash-qla, the Qwen
# team's TileLang kernels) and what it needs beyond the device image's packages (tilelang,
# apache-tvm-ffi, torch-c-dlpack-ext, z3's library) into .deps-qla/site.tar.xz, one
# site-packages tree for python 3.12, for scripts/bench_fla.py --impl flashqla.
#
# The wheels are 83 MB, over what one device call carries beside the project (64 MiB), so
# the tree leaves out what nothing loads (z3's command-line binary and its second copy of
# libz3) and is xz-compressed; it still travels
# in a call of its own, ahead of scripts/device_check.sh's (scripts/device_qla_setup.sh).
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
no_arguments "$0" "$@"
cd "$(dirname "$0")/.."
DEST=.deps-qla
WORK=/tmp/gdn-qla
PKGS=(flash-qla==0.1.3 tilelang==0.1.15 apache-tvm-ffi==0.1.12 torch-c-dlpack-ext==0.1.5
      z3-solver==4.15.4.0)
rm -rf "$WORK" && mkdir -p "$WORK/wheels" "$WORK/site"
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64; do PLATFORMS+=(--platform "$p"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" -d "$WORK/wheels" "${PKGS[@]}"
for w in "$WORK"/wheels/*.whl; do unzip -q -o "$w" -d "$WORK/site"; done
cd "$WORK/site"
rm -rf z3_solver-*.data z3/lib/libz3.so.*
cd - > /dev/null
mkdir -p "$DEST"
XZ_OPT="-9 -T2" tar cJf "$DEST/site.tar.xz" -C "$WORK" site
du -sh "$DEST/site.tar.xz"
