#!/usr/bin/env bash
# Every tool's --help (each gdn_* executable of the bin dir): exit code 0 and a usage
# listing its flags on stdout, --help among them (a tool that printed nothing, or a usage
# on stderr only, fails here).
#   bash tests/cli/test_help.sh <bin dir>
set -uo pipefail
BIN=$1
failed=0 passed=0
for exe in "$BIN"/gdn_*; do
  [ -f "$exe" ] && [ -x "$exe" ] || continue
  tool=$(basename "$exe")
  out=$(timeout 60 "$exe" --help 2>/dev/null)
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^Usage:" <<<"$out" && grep -q -- "--help" <<<"$out"; then
    echo "PASS: $tool --help"
    passed=$((passed + 1))
  else
    echo "FAIL: $tool --help: exit $rc, $(wc -l <<<"$out") lines on stdout, expected a usage"
    failed=$((failed + 1))
  fi
done
# CMake builds 11 tools: fewer found means the glob missed some.
found=$((passed + failed))
[ "$found" -ge 11 ] || { echo "FAIL: $found tools found in $BIN, expected 11"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
