#!/usr/bin/env bash
# One binary for every x86-64 node (issue 36): the default configuration compiles no file
# with -march=native, the host code for the baseline ISA (x86-64-v3 on x86-64), and the
# GEMM kernel files with their own ISA flags; and those kernel objects define nothing but
# their kernel table, so no AVX-512 copy of a shared function can be linked into code that
# runs on an AVX2 CPU (src/ops/gemm/gemm_kernels.h).
#
#   test_build_flags.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/common.sh"
SRC=$1 BUILD=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if cmake -S "$SRC" -B "$WORK/b" -DGDN_BUILD_TESTS=OFF >"$WORK/configure.log" 2>&1; then
  pass "configured with the default flags"
else
  tail -20 "$WORK/configure.log"
  fail "configuring with the default flags"
fi
CC="$WORK/b/compile_commands.json"
if [ -f "$CC" ] && ! grep -q -- "-march=native" "$CC"; then
  pass "no file compiled with -march=native"
else
  fail "-march=native in the default flags (or no $CC)"
fi
if [ "$(uname -m)" = x86_64 ]; then
  host=$(grep -c '"command":.*\.cpp' "$CC")
  base=$(grep '"command":.*\.cpp' "$CC" | grep -c -- "-march=x86-64-v3")
  [ "$host" -gt 0 ] && [ "$host" -eq "$base" ] && pass "all $host host files at -march=x86-64-v3" ||
    fail "$base of $host host files at -march=x86-64-v3"
  for isa in "avx2:-mno-avx512f" "avx512:-mavx512f" "avx512bf16:-mavx512bf16"; do
    file=gemm_${isa%%:*}.cpp flag=${isa#*:}
    grep "\"command\":.*$file" "$CC" | grep -- "$flag" >/dev/null && pass "$file compiled with $flag" ||
      fail "$file not compiled with $flag"
  done
  for isa in avx2 avx512 avx512bf16; do
    obj=$(find "$BUILD/src/ops" -name "gemm_$isa.cpp.o" | head -1)
    if [ -z "$obj" ]; then
      fail "no object gemm_$isa.cpp.o under $BUILD/src/ops"
      continue
    fi
    # Defined symbols other than local ones (t, r, b, d): the table, nothing else.
    extra=$(nm -C --defined-only "$obj" | grep -v " [trbdR] " | grep -v "gdn::la::kGemm")
    [ -z "$extra" ] && pass "gemm_$isa.o defines only its kernel table" ||
      fail "gemm_$isa.o exports more than its table: $extra"
  done
fi
finish
