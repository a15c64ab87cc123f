#!/usr/bin/env bash
# The layer check can fail: on a copy of the tree with one back edge planted at a time
# (between folders of src/, and inside src/gdn's order), tests/check_layers.sh must exit 1
# naming the planted file and the edge; on the untouched copy it must pass.
#   test_layer_rules.sh SOURCE_DIR
set -uo pipefail
SRC=${1:?usage: test_layer_rules.sh SOURCE_DIR}
. "$(dirname "$0")/common.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tree"
cp -r "$SRC/src" "$SRC/apps" "$WORK/tree/"

# plant NAME FILE INCLUDE PHRASE: FILE (under src/) gains #include "INCLUDE" at its top;
# the check must fail with PHRASE on the line naming FILE; FILE is restored after.
plant() {
  local name=$1 file=$WORK/tree/src/$2 inc=$3 phrase=$4 out rc
  cp "$file" "$WORK/saved"
  { printf '#include "%s"\n' "$inc"; cat "$WORK/saved"; } >"$file"
  out=$(bash "$SRC/tests/check_layers.sh" "$WORK/tree" 2>&1)
  rc=$?
  cp "$WORK/saved" "$file"
  if [ "$rc" -eq 1 ] && grep -F -- "src/$2:1 includes \"$inc\"" <<<"$out" | grep -qF -- "$phrase"; then
    pass "$name: refused"
  else
    echo "$out"
    fail "$name: exit $rc (expected 1), no line naming src/$2:1 with '$phrase'"
  fi
}

out=$(bash "$SRC/tests/check_layers.sh" "$WORK/tree" 2>&1) && pass "untouched copy: holds" ||
  { echo "$out"; fail "untouched copy: the check fails on the tree as it is"; }
plant "ops uses train" ops/rmsnorm/rmsnorm.h train/trainer.h "ops may not use train"
plant "chunk uses pass" gdn/chunk/row_math.h gdn/pass/local_pass.h "gdn/chunk may not use gdn/pass"
plant "a phase uses a later phase" gdn/prepare/chunk_prepare.h gdn/backward/chunk_backward.h \
  "gdn/prepare may not use gdn/backward"
plant "pairs use a phase" gdn/pairs/pair_scan.h gdn/state_walk/chunk_state_walk.h \
  "gdn/pairs may not use gdn/state_walk"
plant "a phase uses pairs" gdn/outputs/chunk_outputs.h gdn/pairs/pair_scan.h \
  "gdn/outputs may not use gdn/pairs"
plant "pass uses split" gdn/pass/local_pass.h gdn/split/split_pass.h "gdn/pass may not use gdn/split"
plant "the problem uses the op" gdn/problem.h gdn/op/op.h "gdn's own files may not use gdn/op"
finish
