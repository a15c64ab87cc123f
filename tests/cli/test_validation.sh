#!/usr/bin/env bash
# Validation during training (train.eval_data, docs/usage.md), one case per ctest entry:
#
#   parity   gdn_train (f64, packed documents, 3 steps, --eval-every 2) at cp = 1 and cp = 4
#            logs val_loss after steps 2 and 3; after the last it equals, to 1e-12, gdn_eval's
#            loss on the same windows (the text's first K = 5 consecutive windows of seq_len +
#            1 tokens overlapping by one, written here as a .npy by Python) with the weights
#            the run exported, at cp = 1 and cp = 4; K = 5 is not a multiple of the batch
#            (2), so the last chunk's spare row must not count; the cp = 1 and cp = 4 values
#            agree to 1e-12; the last checkpoint records the best val_loss
#   refused  an eval file shorter than one window (the file's own message, under the key), --eval-sequences beyond what the file
#            holds (naming how many it holds), synthetic eval data, --eval-sequences 0:
#            non-zero exit, one message naming the key, before step 1
#
#   test_validation.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
CONFIG=$SRC/configs/tiny-qwen3-next.json  # eos_token_id 10: a newline of the byte-level text
TEXT=$SRC/data/public_domain.txt
make_work_dir

# close A B REL: |A - B| <= REL |B|
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= r * m) }'; }

case_parity() {
  local T=64 K=5
  # The first K windows of the text's bytes: window i is bytes [i T, i T + T + 1).
  python3 -c "
import sys
sys.path.insert(0, '$SRC/tests/cli')
import npy_tool
data = open('$TEXT', 'rb').read()
T, K = $T, $K
rows = [b for i in range(K) for b in data[i * T:i * T + T + 1]]
npy_tool.write_int64('$WORK/windows.npy', [K, T + 1], rows)
" || { fail "parity: cannot write the windows"; return; }
  local cp
  for cp in 1 4; do
    if ! timeout 200 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$cp" "$TRAIN" --config "$CONFIG" --cp "$cp" \
      --dtype f64 --seq-len "$T" --batch 2 --steps 3 --documents eos --data "$TEXT" \
      --eval-data "$TEXT" --eval-sequences "$K" --eval-every 2 --device cpu \
      --log "$WORK/cp$cp.jsonl" --export-hf "$WORK/export$cp" --checkpoint-dir "$WORK/ck$cp" \
      >"$WORK/train$cp.out" 2>&1; then
      tail -5 "$WORK/train$cp.out"
      fail "parity: gdn_train at cp $cp failed"
      return
    fi
    local steps
    steps=$(jq -c 'select(.val_loss) | .step' "$WORK/cp$cp.jsonl" | tr '\n' ' ')
    [ "$steps" = "1 2 " ] && pass "parity: cp $cp validates after steps 2 and 3 (log steps $steps)" ||
      fail "parity: cp $cp logged validations at steps '$steps', expected '1 2 '"
    if ! timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$cp" "$EVAL" --init-from "$WORK/export$cp" \
      --tokens "$WORK/windows.npy" --cp "$cp" --dtype f64 --documents eos >"$WORK/eval$cp.json" \
      2>"$WORK/eval$cp.err"; then
      tail -5 "$WORK/eval$cp.err"
      fail "parity: gdn_eval at cp $cp failed"
      return
    fi
    local val ref
    val=$(jq -s 'map(select(.val_loss)) | .[-1].val_loss' "$WORK/cp$cp.jsonl")
    ref=$(jq -r .loss "$WORK/eval$cp.json" | tail -1)
    close "$val" "$ref" 1e-12 && pass "parity: cp $cp val_loss $val = gdn_eval's $ref (1e-12)" ||
      fail "parity: cp $cp val_loss $val vs gdn_eval's $ref"
    eval "val$cp=$val"
    # The checkpoint records the best val_loss so far (in its run identity).
    local best recorded
    best=$(jq -s 'map(select(.val_loss) | .val_loss) | min' "$WORK/cp$cp.jsonl")
    recorded=$(grep -a -o 'best_val_loss\\":[-0-9.e+]*' "$WORK/ck$cp/ckpt-00000003.bin" | head -1 | sed 's/.*://')
    [ -n "$recorded" ] && close "$recorded" "$best" 1e-12 &&
      pass "parity: cp $cp's checkpoint records the best val_loss $recorded" ||
      fail "parity: cp $cp's checkpoint records best_val_loss '$recorded', the log's best is $best"
  done
  close "$val4" "$val1" 1e-12 && pass "parity: val_loss at cp 4 = cp 1 ($val1)" ||
    fail "parity: val_loss cp 4 $val4 vs cp 1 $val1"
}

# refused NAME WANT ARGS...: gdn_train exits non-zero before step 1 with WANT in its output.
refused() {
  local name=$1 want=$2
  shift 2
  refused_at_start "$name" "$want" timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$TRAIN" \
    --config "$CONFIG" --cp 2 --seq-len 64 --steps 2 --device cpu "$@"
}

case_refused() {
  head -c 40 "$TEXT" >"$WORK/short.txt"
  refused short "train.eval_data: data file '$WORK/short.txt' has 40 bytes, but a sequence needs 65" \
    --eval-data "$WORK/short.txt"
  local holds=$(( ($(stat -c %s "$TEXT") - 1) / 64 ))
  refused too_many "train.eval_sequences 100000000 is more than train.eval_data '$TEXT' holds: $holds windows" \
    --eval-data "$TEXT" --eval-sequences 100000000
  refused synthetic "train.eval_data 'synthetic': expected a data file" --eval-data synthetic
  refused zero "--eval-sequences 0" --eval-data "$TEXT" --eval-sequences 0
}

run_case
