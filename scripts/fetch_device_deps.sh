#!/usr/bin/env bash
# Run HERE (a machine with Debian's package lists) before a device session: downloads the
# .deb files of gdn-cp's build dependencies into .deps/ (ignored by git), so that
# scripts/device_check.sh can unpack them on the device machine, which cannot fetch
# anything. Carry .deps with the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo '/.deps/' >> .git/info/exclude
cd .deps
# Header-only or small libraries, plus Open MPI and what it links against.
pkgs=(libcxxopts-dev nlohmann-json3-dev catch2 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
      libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-2.1-7
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libpsm2-2 libibverbs1
      librdmacm1 libnl-3-200 libnl-route-3-200 libmunge2 libxnvctrl0 libpciaccess0)
apt-get download "${pkgs[@]}"
du -sh .
