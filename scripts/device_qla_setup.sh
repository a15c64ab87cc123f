#!/usr/bin/env bash
# The device call before scripts/device_check.sh's, on the same warm machine: FlashQLA's
# site-packages tree (.deps-qla/site.tar.xz, from scripts/fetch_flashqla.sh) is too large
# to travel beside the project's binaries, so it comes alone, is unpacked to
# /tmp/gdn-qla/site, and its first calls (TileLang's JIT, which compiles with nvcc) start
# in a process session of their own that outlives this call; device_check.sh waits for
# /tmp/gdn-qla/warm.done and then times FlashQLA beside ours and fla's.
#
#   device tool:  run(command="bash scripts/device_qla_setup.sh", carry=[".deps-qla"],
#                 timeout_s=120), then device_check.sh's call at once
set -uo pipefail
. "$(dirname "$0")/lib/help.sh"
no_arguments "$0" "$@"
cd "$(dirname "$0")/.."
Q=/tmp/gdn-qla
SHAPES=${GDN_QLA_SHAPES:-"1,32768,16,32,128,128;1,8192,16,32,128,128"}
[ -f .deps-qla/site.tar.xz ] || { echo "device_qla_setup.sh: .deps-qla/site.tar.xz missing: run scripts/fetch_flashqla.sh here and carry .deps-qla" >&2; exit 1; }
rm -rf "$Q" && mkdir -p "$Q"
tar xJf .deps-qla/site.tar.xz -C "$Q" || exit 1
# The scripts as they are now: the repository's copy is replaced by the next call's.
cp scripts/bench_fla.py scripts/bench_shapes.py "$Q/"
[ -d /usr/local/cuda ] && export CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH
PYTHONPATH=$Q/site python3 -c "import flash_qla, tilelang; print('flash_qla', flash_qla.__version__, 'tilelang', tilelang.__version__)" ||
  { echo "exit 1 (FlashQLA does not import)" > "$Q/warm.done"; echo "device_qla_setup.sh: FlashQLA does not import (above)" >&2; exit 1; }
setsid bash -c "PYTHONPATH='$Q/site' PYTHONUNBUFFERED=1 timeout 400 python3 '$Q/bench_fla.py' --impl flashqla \
  --shapes '$SHAPES' --reps 1 --warmup 0 > '$Q/warm.jsonl' 2> '$Q/warm.log'; echo \"exit \$?\" > '$Q/warm.done'" \
  < /dev/null > /dev/null 2>&1 &
echo "FlashQLA's first calls started (pid $!): /tmp/gdn-qla/warm.jsonl, warm.log, warm.done"
