#!/usr/bin/env bash
# Every tool's --help: exit code 0 and a usage listing its flags on stdout, --help among
# them (a tool that printed nothing, or a usage on stderr only, fails here).
#   bash tests/cli/test_help.sh <bin dir>
set -uo pipefail
BIN=$1
failed=0 passed=0
for tool in gdn_train gdn_eval gdn_kernel gdn_plan gdn_bench gdn_split_bench gdn_make_inputs \
  gdn_npy_diff; do
  out=$(timeout 60 "$BIN/$tool" --help 2>/dev/null)
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^Usage:" <<<"$out" && grep -q -- "--help" <<<"$out"; then
    echo "PASS: $tool --help"
    passed=$((passed + 1))
  else
    echo "FAIL: $tool --help: exit $rc, $(wc -l <<<"$out") lines on stdout, expected a usage"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
