#!/usr/bin/env bash
# The run's layout (train/run_layout.h, docs/usage.md "The run's layout"): resolved once,
# logged in one line, recorded in the checkpoint, set by keys and flags; the deprecated
# environment variables still set it, with a warning, and lose to a flag.
#   test_layout.sh BIN_DIR SOURCE_DIR
set -uo pipefail
BIN=$1 SRC=$2
. "$(dirname "$0")/common.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ARGS=(--config "$SRC/configs/tiny-qwen3-next.json" --steps 2 --seq-len 64 --batch 2)
unset GDN_GEMM_PATH GDN_CUDA_WALK GDN_CUDA_TF32 GDN_CUDA_ATTENTION

# run NAME [ENV=VALUE...] -- ARGS...: gdn_train on one rank, its output in $WORK/NAME.out,
# its log in $WORK/NAME.jsonl; returns its exit status.
run() {
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 120 "$BIN/gdn_train" "${ARGS[@]}" --log "$WORK/$name.jsonl" "$@" \
    >"$WORK/$name.out" 2>&1
}
layout_of() { grep -o 'layout: .*' "$WORK/$1.out"; }
losses_of() { jq -r .loss "$WORK/$1.jsonl" 2>/dev/null | tr '\n' ' '; }

if run default -- && layout_of default | grep -q 'f32, pair_scan allgather.*recompute none, shard none, gemm [a-z0-9_]*, cuda_walk auto, cuda_tf32 off, attention auto$'; then
  pass "default: one layout line ($(layout_of default))"
else
  cat "$WORK/default.out"; fail "default: no layout line with the defaults"
fi
if run avx2 -- --gemm-path avx2 --cuda-walk tiled --cuda-tf32 --attention-backend exact &&
  layout_of avx2 | grep -q 'gemm avx2, cuda_walk tiled, cuda_tf32 on, attention exact$'; then
  pass "flags: --gemm-path avx2 --cuda-walk tiled --cuda-tf32 --attention-backend exact in the layout"
else
  cat "$WORK/avx2.out"; fail "flags: the layout does not say what the flags chose"
fi
# Every GEMM path gives the same float bits (ops/gemm/gemm.h): the losses do not move.
[ -n "$(losses_of default)" ] && [ "$(losses_of avx2)" = "$(losses_of default)" ] &&
  pass "the avx2 path's losses are the default path's, bit for bit" ||
  fail "losses differ between GEMM paths: $(losses_of avx2) vs $(losses_of default)"
if run env GDN_GEMM_PATH=avx2 -- && layout_of env | grep -q 'gemm avx2,' &&
  [ "$(grep -c 'GDN_GEMM_PATH=avx2 is deprecated .*use --gemm-path or train.gemm_path' "$WORK/env.out")" -eq 1 ]; then
  pass "GDN_GEMM_PATH=avx2: taken, with one deprecation warning"
else
  cat "$WORK/env.out"; fail "GDN_GEMM_PATH=avx2: not taken, or no single deprecation warning"
fi
if run both GDN_GEMM_PATH=bogus GDN_CUDA_TF32=1 -- --gemm-path avx2 --cuda-tf32=false &&
  layout_of both | grep -q 'gemm avx2, cuda_walk auto, cuda_tf32 off' &&
  grep -q 'GDN_GEMM_PATH is ignored: train.gemm_path (--gemm-path) sets it' "$WORK/both.out" &&
  grep -q 'GDN_CUDA_TF32 is ignored: train.cuda_tf32 (--cuda-tf32) sets it' "$WORK/both.out"; then
  pass "a flag wins over the variable, which is ignored with a warning"
else
  cat "$WORK/both.out"; fail "flag and variable: the variable was not ignored, or no warning"
fi
run bad -- --gemm-path avx9
expect_once "--gemm-path avx9" '--gemm-path avx9: expected' "$WORK/bad.out" $?
run badenv GDN_CUDA_ATTENTION=flash --
expect_once "GDN_CUDA_ATTENTION=flash (gone)" \
  'GDN_CUDA_ATTENTION=flash is gone: use --attention-backend auto | cudnn | flash | exact' \
  "$WORK/badenv.out" $?
# The checkpoint records the resolved layout (in the run identity, inside the manifest's
# config text, its quotes escaped; not compared on resume).
if run ckpt -- --gemm-path avx2 --checkpoint-dir "$WORK/ckpt" &&
  strings "$WORK/ckpt/ckpt-00000002.bin" | grep -qF 'layout\":{\"attention_backend\":\"auto\",\"cuda_tf32\":false,\"cuda_walk\":\"auto\",\"dtype\":\"f32\",\"gemm_path\":\"avx2\",\"pair_scan\":\"allgather\",\"recompute\":\"none\",\"shard\":\"none\"}' &&
  run resumed -- --checkpoint-dir "$WORK/ckpt" --resume --steps 3 && grep -q '"step":2' "$WORK/resumed.jsonl"; then
  pass "the checkpoint records run.layout, and a run with another gemm path resumes it"
else
  strings "$WORK/ckpt/ckpt-00000002.bin" 2>/dev/null | grep -o '"layout":{[^}]*}'
  cat "$WORK/resumed.out" 2>/dev/null; fail "checkpoint: no run.layout, or the resume was refused"
fi
# gdn_plan prints the layout from the same function.
if "$BIN/gdn_plan" --config "$SRC/configs/tiny-qwen3-next.json" --gemm-path avx2 >"$WORK/plan.out" 2>&1 &&
  grep -q "layout (gdn_train's, on this CPU): f32, pair_scan .*gemm avx2, cuda_walk auto" "$WORK/plan.out" &&
  "$BIN/gdn_plan" --config "$SRC/configs/tiny-qwen3-next.json" --json 2>/dev/null |
  jq -e '.run_layout.cuda_walk == "auto" and .run_layout.dtype == "f32" and .layout.cp == 1' >/dev/null; then
  pass "gdn_plan: the layout line and its JSON"
else
  cat "$WORK/plan.out"; fail "gdn_plan: no layout line or JSON"
fi
finish
