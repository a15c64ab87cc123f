#!/usr/bin/env bash
# Memory per rank through gdn_train, one case per ctest entry:
#
#   recompute   --recompute layer trains the hybrid MoE model with the same losses, aux
#               losses and gradient norms, bit for bit, as --recompute none (cp = 1, 2, 4),
#               and the estimate it prints is smaller
#   bf16        the bf16 mode's activations kept in bf16 (ops/convert/kept.h): --recompute layer
#               gives --recompute none's losses and gradient norms bit for bit (cp = 1, 2),
#               and the estimate keeps less than f32's for the same run
#   no_logits   a vocabulary of 131072 at 2048 tokens would need 1 GiB of logits in f32;
#               the fused LM head keeps the whole run's peak RSS under 512 MiB
#
#   test_memory.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
make_work_dir

train() {  # train NP LOG ARGS...
  local np=$1 log=$2
  shift 2
  timeout 300 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$BIN/gdn_train" --cp "$np" --log "$log" "$@" \
    >"$log.out" 2>&1
}

case_recompute() {
  for cp in 1 2 4; do
    local args=(--config "$SRC/configs/tiny-qwen3-next.json" --steps 3 --seq-len 64 --batch 2)
    train "$cp" "$WORK/none$cp.jsonl" "${args[@]}" --recompute none
    train "$cp" "$WORK/layer$cp.jsonl" "${args[@]}" --recompute layer
    if same_logs '[.loss, .aux_loss, .grad_norm]' "$WORK/none$cp.jsonl" "$WORK/layer$cp.jsonl"; then
      pass "recompute: cp=$cp, the same losses and gradient norms bit for bit"
    else
      cat "$WORK/layer$cp.jsonl.out"
      fail "recompute: cp=$cp, the runs differ"
    fi
    local a b
    a=$(grep -o "activations [0-9.]* [KMG]iB kept" "$WORK/none$cp.jsonl.out" | head -1)
    b=$(grep -o "activations [0-9.]* [KMG]iB kept" "$WORK/layer$cp.jsonl.out" | head -1)
    [ -n "$a" ] && [ "$a" != "$b" ] && pass "recompute: cp=$cp, the estimate keeps less ($a vs $b)" ||
      fail "recompute: cp=$cp, the estimate does not change ('$a' vs '$b')"
  done
}

case_bf16() {
  for cp in 1 2; do
    local args=(--config "$SRC/configs/tiny-qwen3-next.json" --steps 3 --seq-len 64 --batch 2)
    train "$cp" "$WORK/none$cp.jsonl" "${args[@]}" --recompute none --dtype bf16
    train "$cp" "$WORK/layer$cp.jsonl" "${args[@]}" --recompute layer --dtype bf16
    if same_logs '[.loss, .aux_loss, .grad_norm]' "$WORK/none$cp.jsonl" "$WORK/layer$cp.jsonl"; then
      pass "bf16: cp=$cp, recompute layer gives recompute none's bits"
    else
      cat "$WORK/layer$cp.jsonl.out"
      fail "bf16: cp=$cp, the recomputing run differs"
    fi
  done
  train 1 "$WORK/f32.jsonl" --config "$SRC/configs/tiny-qwen3-next.json" --steps 1 --seq-len 64 \
    --batch 2 --dtype f32
  local a b
  kept_kib() {  # the estimate's "activations X UNIT kept", in KiB
    grep -o "activations [0-9.]* [KMG]iB kept" "$1" | head -1 |
      awk '{ m = $3 == "GiB" ? 1048576 : $3 == "MiB" ? 1024 : 1; print $2 * m }'
  }
  a=$(kept_kib "$WORK/f32.jsonl.out")
  b=$(kept_kib "$WORK/none1.jsonl.out")
  if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { exit !(b < a) }'; then
    pass "bf16: the estimate keeps $b KiB against f32's $a KiB"
  else
    fail "bf16: the estimate keeps '$b', f32 '$a' (expected less in bf16)"
  fi
}

case_no_logits() {
  jq '.model.vocab_size = 131072 | .model.hidden_size = 32 | .model.num_hidden_layers = 1 |
      .model.layer_types = ["linear_attention"] | .model.intermediate_size = 32' \
    "$SRC/configs/tiny.json" >"$WORK/big_vocab.json"
  OMP_NUM_THREADS=2 train 1 "$WORK/v.jsonl" --config "$WORK/big_vocab.json" --steps 1 \
    --seq-len 2048 --batch 1 --data synthetic
  local peak
  peak=$(jq -r '.peak_rss' "$WORK/v.jsonl" 2>/dev/null)
  if [ -n "$peak" ] && [ "$peak" -lt $((512 * 1024 * 1024)) ]; then
    pass "no_logits: peak RSS $((peak / 1048576)) MiB < 512 MiB (full logits: 1024 MiB)"
  else
    cat "$WORK/v.jsonl.out"
    fail "no_logits: peak RSS '$peak' bytes"
  fi
}

run_case
