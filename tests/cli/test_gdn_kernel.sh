#!/usr/bin/env bash
# Command-line tests of gdn_kernel under mpirun, run by ctest as
#   bash tests/cli/test_gdn_kernel.sh <gdn_kernel> <gdn_make_inputs> <mpirun>
# (a) parity: P ranks against one rank, forward and backward, via gdn_npy_diff;
# (b) every bad input gdn_kernel refuses (docs/usage.md, "Bad input"): non-zero exit on
#     all ranks, no hang, and the expected message exactly once per job. Bad .npy files
#     are crafted with printf (no numpy).
#     Values are checked per shard: the first bad value in the whole file is reported,
#     whichever rank holds it;
# (c) each rank reads only its shard: its peak RSS grows by about 1/P of the inputs.
set -uo pipefail

KERNEL=$1
MAKE=$2
MPIRUN=$3
DIFF="$(dirname "$KERNEL")/gdn_npy_diff"
source "$(dirname "$0")/common.sh"

WORK=$(mktemp -d)
export TMPDIR="$WORK"  # the watchdog's heartbeat directories, removed with $WORK
trap 'rm -rf "$WORK"' EXIT

kernel() {  # kernel NP ARGS...: gdn_kernel under mpirun, killed if it hangs
  local np=$1
  shift
  timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$KERNEL" "$@"
}

make_inputs() { "$MAKE" "$@" >/dev/null 2>&1 || { echo "gdn_make_inputs $* failed"; exit 1; }; }

# ---------------------------------------------------------------- crafting .npy files
# npy_header DESCR FORTRAN SHAPE: a v1.0 preamble + header, padded to a multiple of 64.
npy_header() {
  local dict="{'descr': '$1', 'fortran_order': $2, 'shape': $3, }"
  local len=$((${#dict} + 1))
  local pad=$(((64 - (10 + len) % 64) % 64))
  local hl=$((len + pad))
  printf '\x93NUMPY\x01\x00'
  printf "\\x$(printf %02x $((hl & 255)))\\x$(printf %02x $((hl >> 8)))"
  printf '%s%*s\n' "$dict" "$pad" ""
}
# craft_npy PATH DESCR FORTRAN SHAPE NBYTES: header + NBYTES zero bytes of data.
craft_npy() {
  { npy_header "$2" "$3" "$4"; head -c "$5" /dev/zero; } >"$1"
}
# write_i64_npy PATH V...: a 1-D little-endian int64 array.
write_i64_npy() {
  local path=$1
  shift
  {
    npy_header '<i8' False "($#,)"
    local v i
    for v in "$@"; do
      for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(((v >> (8 * i)) & 255)))"; done
    done
  } >"$path"
}
# put_f64 PATH INDEX BYTES: overwrites float64 element INDEX of a v1.0 .npy file with the
# 8 little-endian bytes BYTES (printf escapes).
put_f64() {
  local hl
  hl=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' ')
  printf "$3" | dd of="$1" bs=1 seek=$((10 + hl + 8 * $2)) conv=notrunc status=none
}
# put_nan PATH INDEX: a NaN there.
put_nan() { put_f64 "$1" "$2" '\x00\x00\x00\x00\x00\x00\xf8\x7f'; }

# ---------------------------------------------------------------- (a) parity
# parity NAME NP_A NP_B TOL INPUTS KERNEL_ARGS...: outputs at NP_A ranks vs NP_B ranks.
parity() {
  local name=$1 npa=$2 npb=$3 tol=$4 in=$5
  shift 5
  local a="$WORK/out_${name}_a" b="$WORK/out_${name}_b"
  if ! kernel "$npa" --in "$in" --out "$a" "$@" >"$WORK/log" 2>&1 ||
    ! kernel "$npb" --in "$in" --out "$b" "$@" >>"$WORK/log" 2>&1; then
    cat "$WORK/log"
    fail "$name: gdn_kernel failed"
    return
  fi
  if "$DIFF" "$a" "$b" --tol "$tol" >"$WORK/diff" 2>&1 &&
    grep -q '^dq ' "$WORK/diff" && grep -q '^o ' "$WORK/diff"; then
    pass "$name (np $npa vs np $npb, rel_l2 <= $tol)"
  else
    cat "$WORK/diff"
    fail "$name: np $npa vs np $npb differ"
  fi
}

# B=2, T=200 (not a multiple of 3 ranks or of the chunk), K != V, Hv = 2 Hk, h0 and dht.
make_inputs --out "$WORK/in_main" --B 2 --T 200 --Hk 2 --Hv 4 --K 16 --V 8 --h0 --backward --seed 11 --g-scale 0.05
parity cp3 3 1 1e-10 "$WORK/in_main" --backward --chunk-size 16
parity cp3_l2norm 3 1 1e-10 "$WORK/in_main" --backward --chunk-size 32 --l2norm-qk
parity cp2_f32 2 1 1e-5 "$WORK/in_main" --backward --chunk-size 16 --dtype f32
# T = 5 over 4 ranks: shards 2, 2, 1, 0 (the last rank holds no tokens).
make_inputs --out "$WORK/in_t5" --B 1 --T 5 --Hk 1 --Hv 2 --K 8 --V 16 --h0 --backward --seed 5
parity cp4_empty_rank 4 1 1e-10 "$WORK/in_t5" --backward --chunk-size 16
# Packed sequences crossing the shard boundaries 34 and 68 (int32 boundaries), h0 per sequence.
make_inputs --out "$WORK/in_packed" --B 1 --T 100 --Hk 2 --Hv 4 --K 16 --V 16 --h0 --backward \
  --cu-seqlens 0,13,40,41,77,100 --cu-dtype i32 --seed 7 --g-scale 0.05
parity cp3_packed 3 1 1e-10 "$WORK/in_packed" --backward --chunk-size 16
# The log-depth scan against the linear one at the same rank counts.
for np in 3 4; do
  a="$WORK/out_log$np" b="$WORK/out_lin$np"
  if kernel "$np" --in "$WORK/in_main" --out "$a" --backward --chunk-size 16 --log-depth-scan \
    >"$WORK/log" 2>&1 &&
    kernel "$np" --in "$WORK/in_main" --out "$b" --backward --chunk-size 16 >>"$WORK/log" 2>&1 &&
    "$DIFF" "$a" "$b" --tol 1e-10 >"$WORK/diff" 2>&1; then
    pass "log-depth scan = linear scan at np $np"
  else
    cat "$WORK/log" "$WORK/diff"
    fail "log-depth scan differs from the linear scan at np $np"
  fi
done
# stats.json: each rank receives exactly P*B*Hv*K*(K+V)*8 bytes in the forward all-gather
# and P*B*Hv*K*V*8 in the backward (out_lin3: P=3, B=2, Hv=4, K=16, V=8).
payload_ok() {  # payload_ok STATS SITE BYTES P
  [ "$(sed -n "/\"$2\"/,/]/p" "$1" | grep -cE "\"bytes_received\": $3,?$")" -eq "$4" ]
}
if payload_ok "$WORK/out_lin3/stats.json" cp.fwd.allgather_pairs $((3 * 2 * 4 * 16 * 24 * 8)) 3 &&
  payload_ok "$WORK/out_lin3/stats.json" cp.bwd.allgather_adjoints $((3 * 2 * 4 * 16 * 8 * 8)) 3; then
  pass "stats.json payload per rank"
else
  cat "$WORK/out_lin3/stats.json"
  fail "stats.json payload per rank"
fi
if kernel 2 --help >"$WORK/help" 2>&1 && grep -q -- '--load-balance' "$WORK/help"; then
  pass "--help"
else
  fail "--help"
fi

# ---------------------------------------------------------------- (b) bad input
# bad NAME PHRASE INPUTS KERNEL_ARGS...: 3 ranks must exit non-zero (124 = hang) and the
# combined output must hold PHRASE exactly once.
bad() {
  local name=$1 phrase=$2 in=$3
  shift 3
  kernel 3 --in "$in" --out "$WORK/out_bad" "$@" >"$WORK/log" 2>&1
  expect_once "$name" "$phrase" "$WORK/log" $?
}
# fresh NAME [gdn_make_inputs args]: a valid f64 directory B=1 T=20 Hk=2 Hv=4 K=V=8 to spoil.
fresh() {
  local d="$WORK/bad_$1"
  shift
  rm -rf "$d"
  make_inputs --out "$d" --B 1 --T 20 --Hk 2 --Hv 4 --K 8 --V 8 --h0 --backward --seed 3 "$@"
  echo "$d"
}

d=$(fresh shape) && make_inputs --out "$WORK/other" --B 1 --T 21 --Hk 2 --Hv 4 --K 8 --V 8 &&
  cp "$WORK/other/v.npy" "$d/v.npy"
bad "mismatched shapes (v.npy T=21, q.npy T=20)" "v.npy: shape [1, 21, 4, 8] does not match" "$d"
d=$(fresh gshape) && cp "$WORK/other/g.npy" "$d/g.npy"
bad "mismatched shapes (g.npy)" "g.npy: shape [1, 21, 4] does not match" "$d"
d=$(fresh h0shape) && cp "$WORK/in_main/h0.npy" "$d/h0.npy"
bad "mismatched shapes (h0.npy)" "h0.npy: shape [2, 4, 16, 8] does not match" "$d"
d=$(fresh heads --Hv 3 --allow-invalid)
bad "Hv not a multiple of Hk" "value heads Hv=3 is not a multiple of key heads Hk=2" "$d"
d=$(fresh chunk)
bad "chunk size 48" "chunk_size=48 is not supported" "$d" --chunk-size 48
bad "chunk size 256" "chunk_size=256 is not supported" "$d" --chunk-size 256
d=$(fresh cu_order) && write_i64_npy "$d/cu_seqlens.npy" 0 10 5 20
bad "cu_seqlens decreasing" "cu_seqlens decreases: cu[1]=10, cu[2]=5" "$d"
d=$(fresh cu_end) && write_i64_npy "$d/cu_seqlens.npy" 0 10 15
bad "cu_seqlens not ending at T" "cu_seqlens ends at 15: expected the sequence length T=20" "$d"
d=$(fresh cu_batch --B 2) && write_i64_npy "$d/cu_seqlens.npy" 0 10 20
bad "cu_seqlens with B > 1" "needs batch size B=1, got B=2" "$d"
d=$(fresh cu_float) && craft_npy "$d/cu_seqlens.npy" '<f8' False '(3,)' 24
bad "cu_seqlens of floats" "cu_seqlens.npy: dtype f64 is not supported" "$d"
d=$(fresh missing) && rm "$d/beta.npy"
bad "missing file" "cannot open file '$d/beta.npy'" "$d"
d=$(fresh missing_do) && rm "$d/do.npy"
bad "missing do.npy with --backward" "cannot open file '$d/do.npy'" "$d" --backward
d=$(fresh magic) && printf 'NOTNUMPY, just text\n' >"$d/q.npy"
bad "wrong magic" "q.npy: not a .npy file (bad magic" "$d"
d=$(fresh f16) && craft_npy "$d/k.npy" '<f2' False '(1, 20, 2, 8)' 640
bad "unsupported dtype <f2" "k.npy: unsupported dtype '<f2'" "$d"
d=$(fresh c64) && craft_npy "$d/v.npy" '<c8' False '(1, 20, 4, 8)' 5120
bad "unsupported dtype <c8" "v.npy: unsupported dtype '<c8'" "$d"
d=$(fresh int_q) && craft_npy "$d/q.npy" '<i4' False '(1, 20, 2, 8)' 1280
bad "integer q.npy" "q.npy: dtype i32 is not supported here" "$d"
d=$(fresh fortran) && craft_npy "$d/q.npy" '<f8' True '(1, 20, 2, 8)' 2560
bad "Fortran order" "q.npy: Fortran order is not supported" "$d"
d=$(fresh nan) && put_nan "$d/g.npy" 7
bad "NaN in g (refused by default)" "g.npy: element [0, 1, 3] (flat index 7) is NaN" "$d"
# Per-shard checks, 3 ranks with shards [0, 7), [7, 14), [14, 20) of T = 20: the lowest
# flat index of the whole file wins, not the lowest rank. With B = 2, q [2, 20, 2, 8]:
# flat 160 = [0, 10, 0, 0] lies on rank 1, flat 320 = [1, 0, 0, 0] on rank 0.
d=$(fresh nan_ranks --B 2) && put_nan "$d/q.npy" 320 && put_nan "$d/q.npy" 160
bad "NaN in q on ranks 0 and 1: the first in the file" \
  "q.npy: element [0, 10, 0, 0] (flat index 160) is NaN" "$d"
# The file order wins over the ranks: k (rank 2) is checked before v (rank 0).
d=$(fresh nan_files) && put_nan "$d/v.npy" 3 && put_nan "$d/k.npy" 250
bad "NaN in k on rank 2 and in v on rank 0: k's" "k.npy: element [0, 15, 1, 2] (flat index 250)" "$d"
# The global files are whole on every rank: one message still.
d=$(fresh nan_h0) && put_nan "$d/h0.npy" 5
bad "NaN in h0 (every rank holds it)" "h0.npy: element [0, 0, 0, 5] (flat index 5) is NaN" "$d"
# beta out of range on the last rank only (2.5 = 0x4004000000000000), and later on rank 0.
d=$(fresh beta_last --B 2) && put_f64 "$d/beta.npy" 65 '\x00\x00\x00\x00\x00\x00\x04\x40' &&
  put_f64 "$d/beta.npy" 88 '\x00\x00\x00\x00\x00\x00\x04\x40'
bad "beta = 2.5 on rank 2" "beta.npy: element [0, 16, 1] (flat index 65) is 2.5: expected beta" "$d"
# do.npy is read per shard too (with --backward).
d=$(fresh nan_do) && put_nan "$d/do.npy" 600
bad "NaN in do on rank 2" "do.npy: element [0, 18, 3, 0] (flat index 600) is NaN" "$d" --backward
d=$(fresh zigzag)
bad "--load-balance zigzag" "requires contiguous, in-order shards" "$d" --load-balance zigzag
bad "unknown --load-balance" "load balance 'striped' is not known" "$d" --load-balance striped
bad "bad --dtype" "--dtype f16 is not supported" "$d" --dtype f16
# Only rank 0 writes, so only rank 0 fails here: the others must not wait for it.
bad "unwritable --out (rank 0 only)" "cannot create the output directory" "$d" --out /dev/null/x
# A bad value is reported before the output directory is tried.
d=$(fresh nan_out) && put_nan "$d/beta.npy" 70
bad "a bad value before an unwritable --out" "beta.npy: element [0, 17, 2] (flat index 70) is NaN" \
  "$d" --out /dev/null/x

# ---------------------------------------------------------------- (c) memory per shard
# Zero-filled (sparse) f64 inputs B=1, Hk=Hv=1, K=V=64 at T = 131072 and 262144: 192 and
# 384 MiB of q, k, v (and 1-2 MiB of g, beta). A NaN as the last element of beta stops the
# run right after set-up, so a rank's peak RSS is its start-up plus what it read of the
# inputs. The growth from the smaller to the larger input is what the extra 192 MiB cost:
# two large runs, because start-up alone can peak above a small run's reading (a CUDA
# build maps its libraries late, ~230 MB). At np 1 the growth must show the whole
# difference (the measure works); at np 4 each rank must hold about a quarter: at most
# half of it. ru_maxrss of the child, per rank, via python3 (skipped without it).
zero_inputs() {  # zero_inputs DIR T
  mkdir -p "$1"
  local name shape bytes
  for name in q k v g beta; do
    case $name in
    q | k | v) shape="(1, $2, 1, 64)" bytes=$((8 * $2 * 64)) ;;
    *) shape="(1, $2, 1)" bytes=$((8 * $2)) ;;
    esac
    npy_header '<f8' False "$shape" >"$1/$name.npy"
    truncate -s "+$bytes" "$1/$name.npy"
  done
  put_nan "$1/beta.npy" $(($2 - 1))
}
peak_rss_kb() {  # peak_rss_kb NP DIR: "rank kb" per rank (the run itself fails, as meant)
  timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$1" python3 "$RSS" --exit-zero "$KERNEL" --in "$2" \
    --out "$WORK/out_mem" >"$WORK/mem.log" 2>&1
  grep -o 'peak_rss_kb [0-9]* [0-9]*' "$WORK/mem.log" | cut -d' ' -f2-
}
max_kb() { awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }'; }
if command -v python3 >/dev/null 2>&1; then
  RSS="$(cd "$(dirname "$0")" && pwd)/peak_rss.py"
  zero_inputs "$WORK/mem_big" 262144
  zero_inputs "$WORK/mem_small" 131072
  whole_kb=$((($(cat "$WORK"/mem_big/*.npy | wc -c) - $(cat "$WORK"/mem_small/*.npy | wc -c)) / 1024))
  s1=$(peak_rss_kb 1 "$WORK/mem_small" | max_kb)
  b1=$(peak_rss_kb 1 "$WORK/mem_big" | max_kb)
  s4=$(peak_rss_kb 4 "$WORK/mem_small" | max_kb)
  big4=$(peak_rss_kb 4 "$WORK/mem_big")
  b4=$(echo "$big4" | max_kb)
  n4=$(echo "$big4" | grep -c .)
  grep -q "beta.npy: element \[0, 262143, 0\] (flat index 262143) is NaN" "$WORK/mem.log"
  seen=$?
  g1=$((b1 - s1)) g4=$((b4 - s4))
  msg="inputs grow by $whole_kb KiB; peak RSS growth np 1: $g1 KiB, np 4: $g4 KiB (max over $n4 ranks)"
  if [ "$seen" -eq 0 ] && [ "$n4" -eq 4 ] && [ "$g1" -ge $((whole_kb * 9 / 10)) ] &&
    [ "$g4" -le $((whole_kb / 2)) ]; then
    pass "each rank reads only its shard: $msg"
  else
    cat "$WORK/mem.log"
    fail "memory per shard: $msg (expected np 1 >= 90% and np 4 <= 50% of the inputs)"
  fi
else
  echo "SKIP: memory per shard (no python3 to read each rank's peak RSS)"
fi

finish
