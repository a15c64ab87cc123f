# Sourced by the benchmarks that run gdn_train under mpirun, not run: builds (quietly),
# sources mpi.sh, makes a work directory removed on exit ($work), and gives mib and
# cpu_line.

bash scripts/build.sh >/dev/null
. scripts/lib/mpi.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# mib BYTES: whole MiB.
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }

# cpu_line: "CPU <model>: AVX2 FMA AVX-512F AVX512_BF16, no AMX", the features the GEMM
# paths depend on, to print beside every CPU figure.
cpu_line() {
  local flags isa="" f
  flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
  for f in avx2:AVX2 fma:FMA avx512f:AVX-512F avx512_bf16:AVX512_BF16; do
    grep -qw "${f%%:*}" <<<"$flags" && isa+=" ${f#*:}"
  done
  grep -qw amx_bf16 <<<"$flags" && isa+=", AMX" || isa+=", no AMX"
  echo "CPU $(lscpu | sed -n 's/^Model name: *//p' | head -1):$isa"
}
