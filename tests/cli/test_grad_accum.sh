#!/usr/bin/env bash
# Gradient accumulation (train.grad_accum, docs/usage.md), one case per ctest entry:
#
#   equal    the tiny hybrid MoE model (its load-balancing loss not trained: each
#            micro-batch's own would differ), f64, packed documents of uneven length (the
#            shipped text, a line each), batch 4, 3 steps: --grad-accum 2 and 4 give the
#            losses and gradient norms of --grad-accum 1 at every step and its final
#            weights and AdamW moments (the checkpoints) to 1e-12, at cp 1, 2 and 4
#   sharded  the same with --shard full --ep 2 --recompute layer on dp 2 x cp 2, and with
#            --shard optimizer: --grad-accum 2 against 1
#   memory   seq_len 2048, batch 4: the peak RSS of --grad-accum 4 is below that of 1, and
#            the start-up estimate falls with it
#   refused  --grad-accum 0, and 3 with 4 sequences per dp group: non-zero exit, one message
#            naming the key and the numbers, before step 1
#
#   test_grad_accum.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
TEXT=$SRC/data/public_domain.txt
make_work_dir
jq '.model.output_router_logits = false' "$SRC/configs/tiny-qwen3-next.json" >"$WORK/tiny.json"

# train NAME NP ARGS...: gdn_train f64 on the text's documents, 3 steps, logged to NAME.jsonl,
# its final checkpoint (values and AdamW moments) in NAME.ck/.
train() {
  local name=$1 np=$2
  shift 2
  timeout 200 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$TRAIN" --config "$WORK/tiny.json" --dtype f64 \
    --seq-len 64 --batch 4 --steps 3 --documents eos --data "$TEXT" --device cpu \
    --log "$WORK/$name.jsonl" --checkpoint-dir "$WORK/$name.ck" "$@" >"$WORK/$name.out" 2>&1 ||
    { tail -5 "$WORK/$name.out"; return 1; }
}

# same NAME REF: every step's loss and gradient norm of NAME.jsonl equal REF.jsonl's, and the
# final weights and moments REF's (1e-12).
same() {
  python3 "$SRC/tests/cli/npy_tool.py" ckpt-close "$WORK/$1.ck/ckpt-00000003.bin" \
    "$WORK/$2.ck/ckpt-00000003.bin" 1e-12 || return 1
  python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" <<'PY'
import json, sys
def steps(p):
    return [json.loads(l) for l in open(p) if '"grad_norm"' in l]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
if len(a) != len(b) or not a:
    sys.exit(f"{len(a)} steps vs {len(b)}")
worst = 0.0
for x, y in zip(a, b):
    for k in ("loss", "grad_norm"):
        worst = max(worst, abs(x[k] - y[k]) / abs(y[k]))
print(f"largest relative difference {worst:.2e} over {len(a)} steps")
sys.exit(0 if worst <= 1e-12 else 1)
PY
}

case_equal() {
  local cp n
  for cp in 1 2 4; do
    train "cp${cp}_n1" "$cp" --cp "$cp" || { fail "equal: cp $cp, --grad-accum 1 failed"; continue; }
    for n in 2 4; do
      # --profile (timing only) also names each micro-batch.
      if ! train "cp${cp}_n$n" "$cp" --cp "$cp" --grad-accum "$n" --profile; then
        fail "equal: cp $cp, --grad-accum $n failed"
      elif ! grep -q "micro-batch $n/$n: $((4 / n)) sequences" "$WORK/cp${cp}_n$n.out"; then
        fail "equal: cp $cp, --grad-accum $n --profile does not name micro-batch $n/$n"
      elif msg=$(same "cp${cp}_n$n" "cp${cp}_n1"); then
        pass "equal: cp $cp, --grad-accum $n = 1: $msg"
      else
        fail "equal: cp $cp, --grad-accum $n vs 1: $msg"
      fi
    done
  done
}

case_sharded() {
  local name args
  for name in full optimizer; do
    if [ "$name" = full ]; then args=(--shard full --ep 2 --recompute layer); else args=(--shard optimizer); fi
    if ! train "${name}_n1" 4 --cp 2 --dp 2 "${args[@]}" ||
      ! train "${name}_n2" 4 --cp 2 --dp 2 "${args[@]}" --grad-accum 2; then
      fail "sharded: $name: gdn_train failed"
    elif msg=$(same "${name}_n2" "${name}_n1"); then
      pass "sharded: --shard $name ${args[*]:2}: --grad-accum 2 = 1: $msg"
    else
      fail "sharded: --shard $name: --grad-accum 2 vs 1: $msg"
    fi
  done
}

case_memory() {
  local n peak est
  for n in 1 4; do
    timeout 300 "$MPIRUN" "${MPI_FLAGS[@]}" -np 1 "$TRAIN" --config "$WORK/tiny.json" --seq-len 2048 \
      --batch 4 --steps 1 --device cpu --grad-accum "$n" --log "$WORK/mem$n.jsonl" >"$WORK/mem$n.out" 2>&1 ||
      { tail -5 "$WORK/mem$n.out"; fail "memory: --grad-accum $n failed"; return; }
    peak[$n]=$(jq -r .peak_rss "$WORK/mem$n.jsonl" | tail -1)
    est[$n]=$(grep -o 'activations [0-9.]* [KMG]iB' "$WORK/mem$n.out" | head -1)
  done
  echo "peak RSS: --grad-accum 1 ${peak[1]} bytes, 4 ${peak[4]} bytes; estimate: '${est[1]}' vs '${est[4]}'"
  [ "${peak[4]}" -lt "${peak[1]}" ] && pass "memory: --grad-accum 4's peak RSS is below 1's" ||
    fail "memory: --grad-accum 4's peak RSS ${peak[4]} is not below 1's ${peak[1]}"
  [ -n "${est[1]}" ] && [ "${est[1]}" != "${est[4]}" ] && pass "memory: the estimate's activations fall (${est[1]} -> ${est[4]})" ||
    fail "memory: the estimate's activations did not change ('${est[1]}' vs '${est[4]}')"
}

# refused NAME WANT ARGS...: gdn_train exits non-zero before step 1 with WANT in its output.
refused() {
  local name=$1 want=$2
  shift 2
  refused_at_start "$name" "$want" timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$TRAIN" \
    --config "$WORK/tiny.json" --cp 2 --seq-len 64 --batch 4 --steps 2 --device cpu "$@"
}

case_refused() {
  refused zero "--grad-accum 0: expected an integer >= 1" --grad-accum 0
  refused uneven "grad_accum 3 (--grad-accum) does not divide the 4 sequences of each dp group" --grad-accum 3
}

run_case
