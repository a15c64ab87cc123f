#!/usr/bin/env bash
# gdn_bench --variants (what a profiler runs it with): at a tiny shape the JSON lines hold
# exactly the variants whose whole name matches (one, then the two of a pattern, against
# the four of an unfiltered run), and an expression that does not compile is refused with
# one message naming the flag.
#
#   test_gdn_bench.sh BIN_DIR
set -uo pipefail
source "$(dirname "$0")/common.sh"
[ "$#" -eq 1 ] || { echo "usage: $(basename "$0") BIN_DIR" >&2; exit 2; }
BENCH=$1/gdn_bench
make_work_dir
ARGS=(--json --shapes 1,128,1,2,32,32 --phases=false --ceiling-size 0 --peak-seconds 0.02)

# variants_of [FLAGS...]: the variant names of the timed lines, sorted, one line.
variants_of() {
  "$BENCH" "${ARGS[@]}" "$@" 2>"$WORK/err" | jq -r 'select(.variant) | .variant' | sort | tr '\n' ' '
}
check() {  # check NAME GOT WANT
  if [ "$2" = "$3" ]; then pass "$1: $2"; else fail "$1: got '$2', expected '$3'"; fi
}
check "no filter" "$(variants_of)" "chunked_fwd chunked_fwd_bwd recurrent_fwd recurrent_fwd_bwd "
check "one variant" "$(variants_of --variants chunked_fwd)" "chunked_fwd "
check "a pattern" "$(variants_of --variants '.*_fwd_bwd')" "chunked_fwd_bwd recurrent_fwd_bwd "
check "whole name only" "$(variants_of --variants chunked)" ""
"$BENCH" "${ARGS[@]}" --variants '(' >"$WORK/out" 2>&1
expect_once "a bad expression" "--variants '(': not a regular expression" "$WORK/out" $?
finish
