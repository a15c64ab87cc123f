#!/usr/bin/env bash
# Hugging Face interoperability of gdn_eval and gdn_train, one case per ctest entry:
#
#   parity_<fixture>  gdn_eval on a checkpoint that transformers wrote (tests/fixtures/hf,
#                     scripts/make_hf_fixtures.py) matches transformers' float64 loss,
#                     load-balancing loss and total within 1e-12 relative, and every
#                     gradient within 1e-9 relative, at cp = 1, 2, 3, 4 and both attention
#                     balance modes
#   parity_sharded    the same for the MoE fixtures with the experts over ep = 2, 4 ranks and
#                     the training state sharded (gdn_eval --ep --shard)
#   export_sharded    --export-hf of runs with --shard and --ep, cut into several files
#                     with an index: the replicated export's tensors, read back exactly;
#                     --init-from of it at the same layout (each rank reading its part)
#                     exports the replicated export's bytes
#   roundtrip         gdn_train --export-hf, then gdn_eval and gdn_train --init-from of the
#                     export give the identical loss; --init-from resumes the weights exactly
#   wrong_arch        a checkpoint of another architecture is refused, naming the tensor
#   bare_config       a bare config.json with --train-config trains; --config and
#                     --init-from that disagree are refused naming the key
#   st_header         a header that gives a name twice, or whose data_offsets overlap, leave
#                     a gap or stop short of the end, is refused naming the entries (as the
#                     safetensors library refuses it); the entries in another order load
#   nonfinite_weights a NaN or Inf weight is refused by gdn_eval and gdn_train --init-from,
#                     naming the tensor and its first bad element
#   tied_head         tie_word_embeddings: true with a distinct lm_head.weight loads untied,
#                     as transformers does (its loss and gradients); with an identical one,
#                     tied and without a "skipped" warning
#   symlink_loop      a symlink loop as model.safetensors or as a shard: the OS's reason
#   bf16              gdn_eval --dtype bf16 (mixed precision) on each fixture at cp = 1 and 3:
#                     loss terms within 1% of transformers' float64 ones, and every gradient's
#                     relative L2 error at most 3x that of transformers itself in float32
#                     under torch.autocast(bfloat16) on the same weights and tokens (or 0.02,
#                     whichever is larger): the peer's numbers are committed in
#                     <fixture>/bf16_peer.json by scripts/bf16_torch_grads.py; and a bf16
#                     run's --export-hf writes BF16 tensors, each the nearest bf16 (ties to
#                     even) of its --export-dtype f32 export, with config dtype bfloat16
#
#   test_hf.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
FIX=$SRC/tests/fixtures/hf
make_work_dir

eval_json() {  # eval_json NP OUT_JSON ARGS...: one gdn_eval run, its JSON line into OUT_JSON
  local np=$1 out=$2
  shift 2
  timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$BIN/gdn_eval" "$@" >"$out" 2>"$out.err"
}

# rel_close A B TOL: |A - B| <= TOL |B|
rel_close() {
  python3 -c "import sys; a, b, t = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= t * abs(b) else 1)" "$@"
}

# parity_check NAME TAG NP ARGS...: gdn_eval of fixture NAME on NP ranks with ARGS agrees
# with transformers' loss terms (1e-12) and every gradient (1e-9).
parity_check() {
  local name=$1 tag=$2 np=$3 dir=$FIX/$1
  shift 3
  local out=$WORK/check.json grads=$WORK/check-grads
  rm -rf "$grads"
  if ! eval_json "$np" "$out" --init-from "$dir" --tokens "$dir/tokens.npy" --dtype f64 \
    --chunk-size 16 --grads-out "$grads" "$@"; then
    cat "$out.err"
    fail "$tag: gdn_eval failed"
    return
  fi
  local key got want ok=1
  for key in loss aux_loss total; do
    got=$(jq -r ".$key" "$out") want=$(jq -r ".$key" "$dir/expected.json")
    rel_close "$got" "$want" 1e-12 || { ok=0; echo "$tag: $key $got vs transformers $want"; }
  done
  if [ "$ok" -eq 1 ] && diff <(ls "$dir/grads") <(ls "$grads") >/dev/null &&
    "$BIN/gdn_npy_diff" "$grads" "$dir/grads" --tol 1e-9 >"$WORK/diff.txt"; then
    pass "$tag: loss terms within 1e-12, all $(ls "$grads" | wc -l) gradients within 1e-9"
  else
    grep -v " ok$" "$WORK/diff.txt" 2>/dev/null | head
    fail "$tag: differs from transformers"
  fi
}

# The MoE fixtures with the experts over ep ranks and the training state sharded: as
# transformers, and every gradient within 1e-12 of the replicated run at the same layout.
case_parity_sharded() {
  local name tag np args
  for name in qwen3_next_moe qwen3_5_moe; do
    while IFS='|' read -r tag np args; do
      # shellcheck disable=SC2086
      eval_json "$np" "$WORK/ref.json" --init-from "$FIX/$name" --tokens "$FIX/$name/tokens.npy" \
        --dtype f64 --chunk-size 16 --grads-out "$WORK/ref-grads" ${args%% --ep*} </dev/null ||
        { fail "$name $tag: the replicated gdn_eval failed"; continue; }
      # shellcheck disable=SC2086
      parity_check "$name" "$name $tag" "$np" $args </dev/null
      if "$BIN/gdn_npy_diff" "$WORK/check-grads" "$WORK/ref-grads" --tol 1e-12 >"$WORK/diff.txt"; then
        pass "$name $tag: every gradient within 1e-12 of the replicated run"
      else
        grep -v " ok$" "$WORK/diff.txt" | head -5
        fail "$name $tag: gradients differ from the replicated run beyond 1e-12"
      fi
      rm -rf "$WORK/ref-grads"
    done <<'EOF'
cp=2 ep=2 shard full|2|--cp 2 --ep 2 --shard full
cp=4 ep=4 shard optimizer|4|--cp 4 --ep 4 --shard optimizer
dp=2 x cp=2 ep=2 shard none|4|--cp 2 --ep 2
cp=3 shard full|3|--cp 3 --ep 1 --shard full
cp=4 log_depth ep=2 shard full|4|--cp 4 --pair-scan log_depth --ep 2 --shard full
EOF
  done
  eval_json 2 "$WORK/scan.json" --init-from "$FIX/qwen3_next_moe" \
    --tokens "$FIX/qwen3_next_moe/tokens.npy" --pair-scan ring
  expect_once "gdn_eval --pair-scan ring" '--pair-scan ring: expected' "$WORK/scan.json.err" $?
}

case_parity() {
  local name=$1 dir=$FIX/$1 packed=()
  # A packed fixture: transformers ran its documents with restarting position_ids.
  [ -f "$dir/cu_seqlens.npy" ] && packed=(--cu-seqlens "$dir/cu_seqlens.npy")
  for np in 1 2 3 4; do
    for lb in none layer_local; do
      local tag="$name cp=$np $lb" out=$WORK/$np-$lb.json grads=$WORK/grads-$np-$lb
      if ! eval_json "$np" "$out" --init-from "$dir" --tokens "$dir/tokens.npy" --dtype f64 \
        --chunk-size 16 --attention-load-balance "$lb" --grads-out "$grads" "${packed[@]}"; then
        cat "$out.err"
        fail "$tag: gdn_eval failed"
        continue
      fi
      local ok=1
      for key in loss aux_loss total tokens; do
        local got want
        got=$(jq -r ".$key" "$out") want=$(jq -r ".$key" "$dir/expected.json")
        if ! rel_close "$got" "$want" 1e-12; then
          ok=0
          echo "$tag: $key $got vs transformers $want"
        fi
      done
      [ "$ok" -eq 1 ] && pass "$tag: loss, aux_loss, total (1e-12) and tokens as transformers" ||
        fail "$tag: loss terms differ from transformers"
      # Every tensor transformers has a gradient for, and nothing else.
      local want_n got_n
      want_n=$(ls "$dir/grads" | wc -l) got_n=$(ls "$grads" | wc -l)
      if [ "$want_n" -ne "$got_n" ] || ! diff <(ls "$dir/grads") <(ls "$grads") >/dev/null; then
        fail "$tag: gradient files differ ($got_n written, $want_n expected)"
      elif "$BIN/gdn_npy_diff" "$grads" "$dir/grads" --tol 1e-9 >"$WORK/diff.txt"; then
        pass "$tag: all $got_n gradients within 1e-9 ($(sort -k3 -g "$WORK/diff.txt" | tail -1 | awk '{print "worst " $3 " in " $1}'))"
      else
        grep -v " ok$" "$WORK/diff.txt" | head
        fail "$tag: gradients differ from transformers"
      fi
    done
  done
}

# A short training run of the tiny Qwen3-Next hybrid MoE model, exported.
TRAIN_ARGS=(--config "$SRC/configs/tiny-qwen3-next.json" --steps 2 --seq-len 32 --batch 2
  --dtype f64 --cp 2)

# The initial weights (0 steps) exported from runs whose state is spread over the ranks,
# in files of at most 0.1 MB: the same tensors as the replicated single-rank export, bit
# for bit, and gdn_eval reads them back through the index.
case_export_sharded() {
  local args=(--config "$SRC/configs/tiny-qwen3-next.json" --steps 0 --seq-len 32 --batch 2
    --dtype f64)
  mpi_tool 300 1 "$WORK/ref.log" "$TRAIN" "${args[@]}" \
    --export-hf "$WORK/ref" || { cat "$WORK/ref.log"; fail "export_sharded: the replicated export failed"; return; }
  local layout np
  while IFS='|' read -r layout np; do
    local dir="$WORK/x${np}" tag="export_sharded ($layout, -np $np)"
    rm -rf "$dir"
    # shellcheck disable=SC2086
    if ! mpi_tool 300 "$np" "$WORK/x.log" "$TRAIN" "${args[@]}" $layout \
      --export-hf "$dir" --export-hf-max-mb 0.1 </dev/null; then
      cat "$WORK/x.log"
      fail "$tag: gdn_train failed"
      continue
    fi
    local files
    files=$(ls "$dir" | grep -c '^model-[0-9]*-of-[0-9]*\.safetensors$')
    if [ "$files" -lt 2 ] || [ ! -f "$dir/model.safetensors.index.json" ] ||
      [ "$(jq '.weight_map | length' "$dir/model.safetensors.index.json")" -ne \
        "$(python3 -c 'import json, struct, sys; f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(len([k for k in json.loads(f.read(n)) if k != "__metadata__"]))' "$WORK/ref/model.safetensors")" ]; then
      ls -la "$dir"
      fail "$tag: expected several model-*-of-*.safetensors and an index naming every tensor"
      continue
    fi
    mkdir -p "$WORK/grads_x" "$WORK/grads_ref"
    if eval_json 1 "$WORK/x.json" --init-from "$dir" --tokens "$FIX/qwen3_next_moe/tokens.npy" \
      --grads-out "$WORK/grads_x" </dev/null &&
      eval_json 1 "$WORK/r.json" --init-from "$WORK/ref" --tokens "$FIX/qwen3_next_moe/tokens.npy" \
        --grads-out "$WORK/grads_ref" </dev/null &&
      [ "$(jq .total "$WORK/x.json")" = "$(jq .total "$WORK/r.json")" ] &&
      "$BIN/gdn_npy_diff" "$WORK/grads_x" "$WORK/grads_ref" --tol 0 >/dev/null; then
      pass "$tag: $files files and an index; gdn_eval reads back the replicated export's loss and gradients exactly"
    else
      cat "$WORK/x.json.err" 2>/dev/null | tail -3
      fail "$tag: gdn_eval of the sharded export differs from the replicated one"
    fi
    # --init-from at this layout (each rank reads only its part of each tensor), exported
    # again in one file: the replicated export's bytes.
    rm -rf "$WORK/back"
    # shellcheck disable=SC2086
    if mpi_tool 300 "$np" "$WORK/back.log" "$TRAIN" "${args[@]}" $layout \
      --init-from "$dir" --export-hf "$WORK/back" </dev/null &&
      cmp -s "$WORK/back/model.safetensors" "$WORK/ref/model.safetensors"; then
      pass "$tag: --init-from of it, exported again, is the replicated export byte for byte"
    else
      tail -5 "$WORK/back.log"
      fail "$tag: --init-from of the sharded export, exported again, differs"
    fi
  done <<'EOF'
--cp 2 --shard full --ep 2|2
--cp 2 --dp 2 --shard optimizer --ep 4|4
--cp 4 --ep 2|4
EOF
}

case_roundtrip() {
  mpi_tool 300 2 "$WORK/train.log" "$TRAIN" "${TRAIN_ARGS[@]}" \
    --export-hf "$WORK/export"
  local rc=$?
  if [ "$rc" -ne 0 ] || [ ! -f "$WORK/export/model.safetensors" ] ||
    [ ! -f "$WORK/export/config.json" ]; then
    cat "$WORK/train.log"
    fail "roundtrip: --export-hf wrote no checkpoint (exit $rc)"
    return
  fi
  pass "roundtrip: --export-hf wrote config.json and model.safetensors"
  local tokens=$FIX/qwen3_next_moe/tokens.npy  # ids < 64, inside the vocab of 256
  # The exported checkpoint evaluates the same at every cp (it is read back exactly).
  eval_json 1 "$WORK/e1.json" --init-from "$WORK/export" --tokens "$tokens"
  eval_json 3 "$WORK/e3.json" --init-from "$WORK/export" --tokens "$tokens"
  if rel_close "$(jq .total "$WORK/e3.json")" "$(jq .total "$WORK/e1.json")" 1e-12; then
    pass "roundtrip: gdn_eval of the export agrees at cp = 1 and 3 ($(jq .total "$WORK/e1.json"))"
  else
    cat "$WORK/e1.json" "$WORK/e1.json.err" "$WORK/e3.json"
    fail "roundtrip: gdn_eval of the export"
  fi
  # Export again from --init-from with 0 steps: the same tensors, bit for bit.
  mpi_tool 300 1 "$WORK/train2.log" "$TRAIN" --init-from "$WORK/export" \
    --train-config "$SRC/configs/tiny-qwen3-next.json" --steps 0 --seq-len 32 --batch 2 \
    --dtype f64 --cp 1 --export-hf "$WORK/export2"
  if cmp -s "$WORK/export/model.safetensors" "$WORK/export2/model.safetensors" &&
    cmp -s "$WORK/export/config.json" "$WORK/export2/config.json"; then
    pass "roundtrip: --init-from then --export-hf gives back the same bytes"
  else
    cat "$WORK/train2.log"
    fail "roundtrip: the re-export differs"
  fi
  # The initial weights exported (0 steps), then trained from: the same losses, bit for
  # bit, as training from the seed.
  mpi_tool 300 2 "$WORK/init.log" "$TRAIN" "${TRAIN_ARGS[@]}" --steps 0 \
    --export-hf "$WORK/init"
  mpi_tool 300 2 "$WORK/seed.log" "$TRAIN" "${TRAIN_ARGS[@]}" --steps 3 \
    --log "$WORK/seed.jsonl"
  mpi_tool 300 2 "$WORK/init2.log" "$TRAIN" --init-from "$WORK/init" \
    --train-config "$SRC/configs/tiny-qwen3-next.json" --steps 3 --seq-len 32 --batch 2 --dtype f64 \
    --cp 2 --log "$WORK/init.jsonl"
  if same_logs '[.loss, .aux_loss, .grad_norm]' "$WORK/seed.jsonl" "$WORK/init.jsonl"; then
    pass "roundtrip: training from the exported initial weights gives the seed run's losses exactly"
  else
    cat "$WORK/init2.log"
    fail "roundtrip: --init-from of the exported initial weights trains differently"
  fi
  if grep -q "initial weights from $WORK/export" "$WORK/train2.log"; then
    pass "roundtrip: gdn_train reports the initial weights"
  else
    fail "roundtrip: no 'initial weights from' line"
  fi
}

case_wrong_arch() {
  # The Qwen3.5 dense fixture's weights under the Qwen3-Next MoE fixture's config.
  mkdir -p "$WORK/mixed"
  cp "$FIX/qwen3_next_moe/config.json" "$WORK/mixed/"
  cp "$FIX/qwen3_5_dense/model.safetensors" "$WORK/mixed/"
  eval_json 2 "$WORK/out.json" --init-from "$WORK/mixed" --tokens "$FIX/qwen3_next_moe/tokens.npy"
  expect_once "wrong_arch: a Qwen3.5 checkpoint under a Qwen3-Next config" \
    "has no tensor 'model.embed_tokens.weight'" "$WORK/out.json.err" $?
  # Same family, another shape: the tensor and both shapes are named.
  mkdir -p "$WORK/shape"
  jq '.hidden_size = 48' "$FIX/qwen3_next_moe/config.json" >"$WORK/shape/config.json"
  cp "$FIX/qwen3_next_moe/model.safetensors" "$WORK/shape/"
  eval_json 2 "$WORK/out2.json" --init-from "$WORK/shape" --tokens "$FIX/qwen3_next_moe/tokens.npy"
  expect_once "wrong_arch: hidden_size 48 against a 32-wide checkpoint" \
    "tensor 'model.embed_tokens.weight' has shape [64, 32], expected [64, 48]" \
    "$WORK/out2.json.err" $?
  # A tensor the model does not have.
  mkdir -p "$WORK/extra"
  jq '.num_hidden_layers = 3 | .layer_types = .layer_types[0:3]' "$FIX/qwen3_next_moe/config.json" \
    >"$WORK/extra/config.json"
  cp "$FIX/qwen3_next_moe/model.safetensors" "$WORK/extra/"
  eval_json 1 "$WORK/out3.json" --init-from "$WORK/extra" --tokens "$FIX/qwen3_next_moe/tokens.npy"
  expect_once "wrong_arch: a 4-layer checkpoint under a 3-layer config" \
    "has a tensor 'model.layers.3." "$WORK/out3.json.err" $?
}

case_bare_config() {
  # A bare config.json as --config, the train settings from --train-config.
  jq '.model' "$SRC/configs/tiny-qwen3.5.json" >"$WORK/config.json"
  jq '.train' "$SRC/configs/tiny-qwen3.5.json" >"$WORK/train.json"
  mpi_tool 300 2 "$WORK/a.log" "$TRAIN" --config "$WORK/config.json" \
    --train-config "$WORK/train.json" --steps 2 --seq-len 32 --cp 2 --log "$WORK/a.jsonl"
  mpi_tool 300 2 "$WORK/b.log" "$TRAIN" \
    --config "$SRC/configs/tiny-qwen3.5.json" --steps 2 --seq-len 32 --cp 2 --log "$WORK/b.jsonl"
  if same_logs 'del(.step_ms, .peak_rss, .peak_device, .model_tflops, .mfu)' "$WORK/a.jsonl" "$WORK/b.jsonl"; then
    pass "bare_config: config.json + --train-config trains exactly as the run file"
  else
    cat "$WORK/a.log"
    fail "bare_config: the two runs differ"
  fi
  # A run file with "train" and --train-config too is ambiguous.
  mpi_tool 60 2 "$WORK/c.log" "$TRAIN" \
    --config "$SRC/configs/tiny-qwen3.5.json" --train-config "$WORK/train.json"
  expect_once "bare_config: two train objects" "gives the train settings too" "$WORK/c.log" $?
  # --config and --init-from of different models.
  mpi_tool 60 2 "$WORK/d.log" "$TRAIN" \
    --config "$SRC/configs/tiny-qwen3.5.json" --init-from "$FIX/qwen3_5_moe"
  expect_once "bare_config: --config and --init-from disagree" "describe different models" \
    "$WORK/d.log" $?
  grep -q "hidden_size: 64 vs 32" "$WORK/d.log" && pass "bare_config: the key and both values are named" ||
    fail "bare_config: no 'hidden_size: 64 vs 32' in the message"
}

# st_rewrite IN OUT MODE: IN's tensors under a rewritten header (python, no safetensors
# package): MODE dup (model.norm.weight given twice, the second on another tensor's
# bytes), overlap (model.norm.weight on the same bytes as the layer-0 input_layernorm),
# gap (8 unused bytes after lm_head.weight), tail (8 bytes after the last tensor),
# reorder (the same entries, reversed in the header).
st_rewrite() {
  python3 - "$@" <<'PY'
import json, struct, sys
src, dst, mode = sys.argv[1:4]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
items = list(h.items())
norm, other = "model.norm.weight", "model.layers.0.input_layernorm.weight"
if mode == "dup":
    items.append((norm, dict(h[norm], data_offsets=h[other]["data_offsets"])))
elif mode == "overlap":
    h[norm]["data_offsets"] = h[other]["data_offsets"]
elif mode == "gap":
    cut = h["lm_head.weight"]["data_offsets"][1]
    data = data[:cut] + bytes(8) + data[cut:]
    for k, v in h.items():
        if k != "__metadata__" and v["data_offsets"][0] >= cut:
            v["data_offsets"] = [v["data_offsets"][0] + 8, v["data_offsets"][1] + 8]
elif mode == "tail":
    data += bytes(8)
elif mode == "reorder":
    items.reverse()
text = "{" + ",".join(json.dumps(k) + ":" + json.dumps(v) for k, v in items) + "}"
text += " " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text.encode() + data)
PY
}

case_st_header() {
  local fix=$FIX/qwen3_next_moe tokens=$FIX/qwen3_next_moe/tokens.npy
  local norm="tensor 'model.norm.weight'" ln0="tensor 'model.layers.0.input_layernorm.weight'"
  for mode in dup overlap gap tail reorder; do
    mkdir -p "$WORK/$mode"
    cp "$fix/config.json" "$WORK/$mode/"
    st_rewrite "$fix/model.safetensors" "$WORK/$mode/model.safetensors" "$mode"
  done
  eval_json 2 "$WORK/dup.json" --init-from "$WORK/dup" --tokens "$tokens"
  expect_once "st_header: a name given twice" "gives 'model.norm.weight' twice" \
    "$WORK/dup.json.err" $?
  grep -q "data_offsets \[419328,419584\]; entry [0-9]*: data_offsets \[32768,33024\]" \
    "$WORK/dup.json.err" && pass "st_header: both entries of the name are shown" ||
    fail "st_header: the two entries of the duplicate are not both shown"
  eval_json 1 "$WORK/overlap.json" --init-from "$WORK/overlap" --tokens "$tokens"
  expect_once "st_header: two tensors on the same bytes" \
    "$norm (data_offsets [32768, 33024]) overlaps $ln0 (data_offsets [32768, 33024])" \
    "$WORK/overlap.json.err" $?
  eval_json 1 "$WORK/gap.json" --init-from "$WORK/gap" --tokens "$tokens"
  expect_once "st_header: unused bytes between two tensors" \
    "bytes [16384, 16392) of the data section belong to no tensor: a gap between tensor 'lm_head.weight' (data_offsets [0, 16384]) and tensor 'model.embed_tokens.weight' (data_offsets [16392, 32776])" \
    "$WORK/gap.json.err" $?
  eval_json 1 "$WORK/tail.json" --init-from "$WORK/tail" --tokens "$tokens"
  expect_once "st_header: bytes after the last tensor" \
    "has 8 bytes after the last tensor, $norm (data_offsets [419328, 419584]) that belong to no tensor" \
    "$WORK/tail.json.err" $?
  # The header's order is free: the same entries reversed give the fixture's loss.
  if eval_json 1 "$WORK/reorder.json" --init-from "$WORK/reorder" --tokens "$tokens" --dtype f64 \
    --chunk-size 16 && rel_close "$(jq .total "$WORK/reorder.json")" "$(jq .total "$fix/expected.json")" 1e-12; then
    pass "st_header: the entries in another order load and give transformers' total"
  else
    cat "$WORK/reorder.json" "$WORK/reorder.json.err"
    fail "st_header: a header in another order was refused or read differently"
  fi
}

# st_poke IN OUT TENSOR INDEX VALUE: IN with element INDEX of the F64 tensor set to VALUE.
st_poke() {
  python3 - "$@" <<'PY'
import json, struct, sys
src, dst, name, index, value = sys.argv[1:6]
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
e = json.loads(b[8:8 + n])[name]
assert e["dtype"] == "F64"
at = 8 + n + e["data_offsets"][0] + 8 * int(index)
b[at:at + 8] = struct.pack("<d", float(value))
open(dst, "wb").write(b)
PY
}

case_nonfinite_weights() {
  local fix=$FIX/qwen3_next_moe tokens=$FIX/qwen3_next_moe/tokens.npy
  mkdir -p "$WORK/nan" "$WORK/inf" "$WORK/big"
  for d in nan inf big; do cp "$fix/config.json" "$WORK/$d/"; done
  st_poke "$fix/model.safetensors" "$WORK/nan/model.safetensors" model.norm.weight 5 nan
  st_poke "$fix/model.safetensors" "$WORK/inf/model.safetensors" \
    model.layers.0.linear_attn.in_proj_qkvz.weight 70 -inf
  st_poke "$fix/model.safetensors" "$WORK/big/model.safetensors" model.embed_tokens.weight 33 1e300
  eval_json 2 "$WORK/nan.json" --init-from "$WORK/nan" --tokens "$tokens"
  expect_once "nonfinite_weights: gdn_eval, a NaN" \
    "tensor 'model.norm.weight' (F64 [32]) holds nan at element 5 (index [5])" "$WORK/nan.json.err" $?
  [ ! -s "$WORK/nan.json" ] && pass "nonfinite_weights: no loss line" ||
    fail "nonfinite_weights: gdn_eval printed $(cat "$WORK/nan.json")"
  eval_json 1 "$WORK/inf.json" --init-from "$WORK/inf" --tokens "$tokens" --dtype f64
  expect_once "nonfinite_weights: gdn_eval, an Inf in a matrix" \
    "tensor 'model.layers.0.linear_attn.in_proj_qkvz.weight' (F64 [96, 32]) holds -inf at element 70 (index [2, 6])" \
    "$WORK/inf.json.err" $?
  # Finite in the file, but not in f32: the stored value is named.
  eval_json 1 "$WORK/big.json" --init-from "$WORK/big" --tokens "$tokens" --dtype f32
  expect_once "nonfinite_weights: gdn_eval, an F64 beyond the f32 range" \
    "holds inf at element 33 (index [1, 1]) (the stored F64 value" "$WORK/big.json.err" $?
  mpi_tool 120 2 "$WORK/train.log" "$TRAIN" --init-from "$WORK/inf" \
    --train-config "$SRC/configs/tiny-qwen3-next.json" --steps 1 --seq-len 32 --batch 2 \
    --dtype f64 --cp 2
  expect_once "nonfinite_weights: gdn_train --init-from, an Inf" \
    "tensor 'model.layers.0.linear_attn.in_proj_qkvz.weight' (F64 [96, 32]) holds -inf at element 70" \
    "$WORK/train.log" $?
}

case_tied_head() {
  local fix=$FIX/qwen3_next_moe tokens=$FIX/qwen3_next_moe/tokens.npy
  # The fixture's distinct lm_head.weight under tie_word_embeddings: true. transformers
  # loads it untied: the fixture's own loss and gradients, which it computed untied.
  mkdir -p "$WORK/distinct"
  jq '.tie_word_embeddings = true' "$fix/config.json" >"$WORK/distinct/config.json"
  cp "$fix/model.safetensors" "$WORK/distinct/"
  if ! eval_json 2 "$WORK/d.json" --init-from "$WORK/distinct" --tokens "$tokens" --dtype f64 \
    --chunk-size 16 --grads-out "$WORK/d_grads"; then
    cat "$WORK/d.json.err"
    fail "tied_head: gdn_eval failed"
    return
  fi
  local ok=1
  for key in loss aux_loss total; do
    rel_close "$(jq ".$key" "$WORK/d.json")" "$(jq ".$key" "$fix/expected.json")" 1e-12 || ok=0
  done
  [ "$ok" -eq 1 ] && pass "tied_head: a distinct lm_head loads untied: transformers' loss terms" || {
    cat "$WORK/d.json" "$WORK/d.json.err"
    fail "tied_head: the loss is not transformers' (untied) loss"
  }
  if diff <(ls "$fix/grads") <(ls "$WORK/d_grads") >/dev/null &&
    "$BIN/gdn_npy_diff" "$WORK/d_grads" "$fix/grads" --tol 1e-9 >"$WORK/diff.txt"; then
    pass "tied_head: every gradient, lm_head.weight's too, is transformers' within 1e-9"
  else
    grep -v " ok$" "$WORK/diff.txt" | head
    fail "tied_head: gradients differ from transformers' untied ones"
  fi
  [ "$(grep -cF "lm_head.weight differs from model.embed_tokens.weight: the model is built untied" \
    "$WORK/d.json.err")" -eq 1 ] && pass "tied_head: the untying is warned about, once" ||
    fail "tied_head: no single warning about the untied head"
  grep -q "not part of the text model" "$WORK/d.json.err" &&
    fail "tied_head: lm_head.weight reported as skipped" || pass "tied_head: nothing reported skipped"
  # gdn_train builds it untied too: its export says so.
  mpi_tool 300 1 "$WORK/train.log" "$TRAIN" --init-from "$WORK/distinct" \
    --train-config "$SRC/configs/tiny-qwen3-next.json" --steps 0 --seq-len 32 --batch 2 \
    --dtype f64 --cp 1 --export-hf "$WORK/export"
  if [ "$(jq .tie_word_embeddings "$WORK/export/config.json" 2>/dev/null)" = false ]; then
    pass "tied_head: gdn_train --init-from trains it untied (the export has tie_word_embeddings: false)"
  else
    cat "$WORK/train.log"
    fail "tied_head: gdn_train --init-from did not untie the head"
  fi
  # An lm_head.weight equal to the embedding is the tied head itself: tied, no warning,
  # and the loss of the same weights untied.
  mkdir -p "$WORK/same" "$WORK/same_untied"
  python3 - "$fix/model.safetensors" "$WORK/same/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
(a0, a1), (e0, e1) = h["lm_head.weight"]["data_offsets"], h["model.embed_tokens.weight"]["data_offsets"]
b[8 + n + a0:8 + n + a1] = b[8 + n + e0:8 + n + e1]
open(sys.argv[2], "wb").write(b)
PY
  cp "$WORK/same/model.safetensors" "$WORK/same_untied/"
  jq '.tie_word_embeddings = true' "$fix/config.json" >"$WORK/same/config.json"
  cp "$fix/config.json" "$WORK/same_untied/"
  eval_json 1 "$WORK/s.json" --init-from "$WORK/same" --tokens "$tokens" --dtype f64 \
    --grads-out "$WORK/s_grads"
  eval_json 1 "$WORK/su.json" --init-from "$WORK/same_untied" --tokens "$tokens" --dtype f64
  if [ -s "$WORK/s.json" ] && rel_close "$(jq .total "$WORK/s.json")" "$(jq .total "$WORK/su.json")" 1e-12 &&
    [ ! -e "$WORK/s_grads/lm_head.weight.npy" ] && ! grep -q "skipped\|untied" "$WORK/s.json.err"; then
    pass "tied_head: an identical lm_head.weight is the tied head: no warning, the same loss"
  else
    cat "$WORK/s.json" "$WORK/s.json.err" "$WORK/su.json"
    fail "tied_head: an identical lm_head.weight was untied, warned about or read differently"
  fi
}

case_symlink_loop() {
  local fix=$FIX/qwen3_next_moe tokens=$FIX/qwen3_next_moe/tokens.npy
  mkdir -p "$WORK/loop" "$WORK/shard"
  cp "$fix/config.json" "$WORK/loop/"
  ln -s model.safetensors "$WORK/loop/model.safetensors"
  eval_json 2 "$WORK/loop.json" --init-from "$WORK/loop" --tokens "$tokens"
  expect_once "symlink_loop: model.safetensors" \
    "cannot open '$WORK/loop/model.safetensors': Too many levels of symbolic links" \
    "$WORK/loop.json.err" $?
  # A link to nothing: named as such, not as a directory without weights.
  mkdir -p "$WORK/dangling"
  cp "$fix/config.json" "$WORK/dangling/"
  ln -s gone.safetensors "$WORK/dangling/model.safetensors"
  eval_json 1 "$WORK/dangling.json" --init-from "$WORK/dangling" --tokens "$tokens"
  expect_once "symlink_loop: a dangling model.safetensors" \
    "'$WORK/dangling/model.safetensors' is a symbolic link to 'gone.safetensors', which does not exist" \
    "$WORK/dangling.json.err" $?
  # A shard of an index that loops.
  cp "$fix/config.json" "$WORK/shard/"
  cp "$fix/model.safetensors" "$WORK/shard/model-00001-of-00002.safetensors"
  ln -s model-00002-of-00002.safetensors "$WORK/shard/model-00002-of-00002.safetensors"
  python3 - "$fix/model.safetensors" "$WORK/shard/model.safetensors.index.json" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
m = {k: "model-00001-of-00002.safetensors" for k in h if k != "__metadata__"}
m["model.norm.weight"] = "model-00002-of-00002.safetensors"
json.dump({"metadata": {}, "weight_map": m}, open(sys.argv[2], "w"))
PY
  eval_json 1 "$WORK/shard.json" --init-from "$WORK/shard" --tokens "$tokens"
  expect_once "symlink_loop: a shard" \
    "tensor 'model.norm.weight' is in shard 'model-00002-of-00002.safetensors', which cannot be opened ($WORK/shard/model-00002-of-00002.safetensors): Too many levels of symbolic links" \
    "$WORK/shard.json.err" $?
}

# bf16 mixed precision against float64, bounded by the peer's own bf16 error. The fixtures
# are tiny models with large random weights (std 0.2): there bf16 rounding moves some
# gradients by as much as they are large, for transformers' autocast as for gdn-cp (up to
# 2.6 and 3.6 relative for the dense fixture's A_log), so a fixed tolerance would be
# either vacuous or wrong; a per-tensor bound by the peer's error is neither. The factor 3
# covers the spread of one rounding sample against another (gdn-cp / transformers measured
# 0.3-1.7 per tensor at cp = 1 and 3).
case_bf16() {
  local name np
  for name in qwen3_next_moe qwen3_5_dense qwen3_5_moe; do
    local dir=$FIX/$name
    for np in 1 3; do
      local tag="$name bf16 cp=$np" out=$WORK/bf16-$np.json grads=$WORK/bf16-grads-$np
      if ! eval_json "$np" "$out" --init-from "$dir" --tokens "$dir/tokens.npy" --dtype bf16 \
        --chunk-size 16 --grads-out "$grads"; then
        cat "$out.err"
        fail "$tag: gdn_eval failed"
        continue
      fi
      local ok=1 key got want
      for key in loss aux_loss total; do
        got=$(jq -r ".$key" "$out") want=$(jq -r ".$key" "$dir/expected.json")
        rel_close "$got" "$want" 1e-2 || { ok=0; echo "$tag: $key $got vs transformers $want"; }
      done
      [ "$ok" -eq 1 ] && pass "$tag: loss terms within 1% of float64" ||
        fail "$tag: loss terms differ from float64 by more than 1%"
      "$BIN/gdn_npy_diff" "$grads" "$dir/grads" --tol 1e30 >"$WORK/diff.txt"
      if python3 - "$WORK/diff.txt" "$dir/bf16_peer.json" "$(ls "$dir/grads" | wc -l)" <<'PY'; then
import json, sys
peer = json.load(open(sys.argv[2]))["rel_l2"]
lines = [l.split() for l in open(sys.argv[1]) if l.endswith(" ok\n")]
bad = [f"{n}: {float(r):.3e} > 3 x {peer[n]:.3e}" for n, _, r, _ in lines
       if float(r) > max(3 * peer[n], 0.02)]
if bad:
    print("\n".join(bad))
worst = max((float(r) / max(3 * peer[n], 0.02), n) for n, _, r, _ in lines)
print(f"{len(lines)} gradients, worst at {worst[0]:.2f} of its bound ({worst[1]})")
sys.exit(1 if bad or len(lines) != int(sys.argv[3]) else 0)
PY
        pass "$tag: every gradient within 3x transformers' own bf16 error"
      else
        fail "$tag: gradients beyond 3x transformers' bf16 error"
      fi
    done
  done
  # The export of a bf16 run: bf16 by default, f32 when asked; the first the nearest bf16 of
  # the second, judged by distance (not by the bit trick the exporter uses).
  local dtype
  for dtype in bf16 f32; do
    mpi_tool 300 1 "$WORK/export-$dtype.log" "$TRAIN" \
      --init-from "$FIX/qwen3_next_moe" --train-config "$SRC/configs/tiny-qwen3-next.json" \
      --steps 0 --seq-len 32 --batch 2 --dtype bf16 --cp 1 --export-dtype "$dtype" \
      --export-hf "$WORK/export-$dtype" ||
      { cat "$WORK/export-$dtype.log"; fail "bf16 export: gdn_train --export-dtype $dtype failed"; return; }
  done
  # --export-dtype bf16 is the default: the same export again without it.
  mpi_tool 300 1 /dev/null "$TRAIN" \
    --init-from "$FIX/qwen3_next_moe" --train-config "$SRC/configs/tiny-qwen3-next.json" \
    --steps 0 --seq-len 32 --batch 2 --dtype bf16 --cp 1 --export-hf "$WORK/export-default"
  if cmp -s "$WORK/export-default/model.safetensors" "$WORK/export-bf16/model.safetensors" &&
    [ "$(jq -r .dtype "$WORK/export-bf16/config.json")" = bfloat16 ] &&
    python3 - "$WORK/export-bf16/model.safetensors" "$WORK/export-f32/model.safetensors" <<'PY' &&
import json, struct, sys
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}
def value(bits16):  # the float a bf16 pattern stands for
    return struct.unpack("<f", struct.pack("<I", bits16 << 16))[0]
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), "the exports hold different tensors"
count = 0
for k in a:
    assert a[k][0] == "BF16" and b[k][0] == "F32", (k, a[k][0], b[k][0])
    got = struct.unpack(f"<{len(a[k][1]) // 2}H", a[k][1])
    for i, x in enumerate(struct.unpack(f"<{len(b[k][1]) // 4}f", b[k][1])):
        u = struct.unpack("<I", struct.pack("<f", x))[0]
        lo = u >> 16
        if u & 0xFFFF == 0:
            want = lo
        else:
            dlo, dhi = abs(x - value(lo)), abs(x - value(lo + 1))
            want = lo if dlo < dhi else lo + 1 if dhi < dlo else (lo + (lo & 1))
        assert got[i] == want, f"{k}[{i}]: {got[i]:#06x}, expected {want:#06x} for {x!r}"
        count += 1
print(f"{len(a)} tensors, {count} values")
PY
    eval_json 1 "$WORK/bf16-export.json" --init-from "$WORK/export-bf16" \
      --tokens "$FIX/qwen3_next_moe/tokens.npy"; then
    pass "bf16 export: BF16 tensors by default, each the nearest bf16 of the f32 export; it loads"
  else
    fail "bf16 export: not BF16 by default, not the nearest bf16 of the f32 export, or not loadable"
  fi
}

case "$CASE" in
  bf16) case_bf16 ;;
  parity_sharded) case_parity_sharded ;;
  export_sharded) case_export_sharded ;;
  parity_*) case_parity "${CASE#parity_}" ;;
  roundtrip) case_roundtrip ;;
  wrong_arch) case_wrong_arch ;;
  bare_config) case_bare_config ;;
  st_header) case_st_header ;;
  nonfinite_weights) case_nonfinite_weights ;;
  tied_head) case_tied_head ;;
  symlink_loop) case_symlink_loop ;;
  *) echo "test_hf.sh: unknown case '$CASE'" >&2; exit 2 ;;
esac
finish
