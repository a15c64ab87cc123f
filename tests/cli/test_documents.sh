#!/usr/bin/env bash
# Packed documents through gdn_train and gdn_eval (train.documents, docs/usage.md), one
# case per ctest entry:
#
#   curves    gdn_train --documents eos on the shipped text (a line is a document, ending
#             with its newline, eos_token_id 10): the 6-step losses at cp = 1, 2, 4 and cp 2
#             with layer_local attention agree within 1e-4 (f32); they differ from the run
#             without documents; the log counts fewer targets than tokens; the start-up line
#             reports the documents once
#   megatron  a Megatron .bin/.idx written here by an independent writer (Python's struct,
#             following megatron/core/datasets/indexed_dataset.py) of the text's lines, one
#             document each, trains bit-identically to the same tokens in a .u32 split at
#             the newlines, with a config that has no eos_token_id (the index alone)
#   refused   an index that disagrees with its .bin (token count, a sequence offset, the
#             magic), an id outside the vocabulary in the .bin, documents eos without an
#             eos_token_id, and gdn_eval's bad --documents / --cu-seqlens: non-zero exit on
#             every rank, the message once, before step 1
#   eval      gdn_eval --cu-seqlens on the qwen3_next_moe fixture (f64) with boundaries on
#             the cp = 3 shard edges and one-token documents: the loss at cp = 1, 2, 3 and
#             layer_local agrees to 1e-12 and equals the target-weighted sum of each document
#             run alone (its own gdn_eval) to 1e-12; --documents eos with an eos_token_id
#             set in the fixture's config equals --cu-seqlens at the same boundaries
#
#   test_documents.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
CONFIG=$SRC/configs/tiny-qwen3-next.json  # eos_token_id 10: a newline of the byte-level text
TEXT=$SRC/data/public_domain.txt
FIX=$SRC/tests/fixtures/hf/qwen3_next_moe
make_work_dir

train() { log_run 300 "$@"; }  # train NAME NP ARGS...: log_run (common.sh)
# bad NAME PHRASE NP TOOL ARGS...: refused with PHRASE exactly once.
bad() {
  local name=$1 phrase=$2 np=$3 tool=$4
  shift 4
  timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$BIN/$tool" "$@" >"$WORK/bad.out" 2>&1
  expect_once "$name" "$phrase" "$WORK/bad.out" $?
}

# megatron_write PREFIX TYPE: the text's lines (each with its newline) as one document each,
# X.bin of TYPE (u2: uint16, i4: int32) and X.idx as Megatron's _IndexWriter lays it out;
# also PREFIX.u32, the same tokens as a raw stream.
megatron_write() {
  python3 - "$TEXT" "$1" "$2" <<'EOF'
import struct, sys
text, prefix, kind = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(text, "rb").read()
docs, start = [], 0
for i, b in enumerate(data):
    if b == 10:
        docs.append(data[start:i + 1])
        start = i + 1
if start < len(data):
    docs.append(data[start:])
fmt, code, size = {"u2": ("H", 8, 2), "i4": ("i", 4, 4)}[kind]
with open(prefix + ".bin", "wb") as f:
    for d in docs:
        f.write(struct.pack("<%d%s" % (len(d), fmt), *d))
lengths = [len(d) for d in docs]
pointers, at = [], 0
for n in lengths:
    pointers.append(at)
    at += n * size
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00")
    f.write(struct.pack("<Q", 1))
    f.write(struct.pack("<B", code))
    f.write(struct.pack("<Q", len(docs)))
    f.write(struct.pack("<Q", len(docs) + 1))
    f.write(struct.pack("<%di" % len(docs), *lengths))
    f.write(struct.pack("<%dq" % len(docs), *pointers))
    f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
with open(prefix + ".u32", "wb") as f:
    f.write(struct.pack("<%dI" % len(data), *data))
print(len(docs), "documents,", len(data), "tokens")
EOF
}

NPY="$(dirname "$0")/npy_tool.py"  # write-i64; read_int64 / write_int64 as a module
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
write_npy() { python3 "$NPY" write-i64 "$@"; }  # write_npy FILE SHAPE VALUES...

case "$CASE" in
curves)
  ARGS=(--config "$CONFIG" --data "$TEXT" --seq-len 250 --steps 6 --dp 1)
  train c1 1 "${ARGS[@]}" --cp 1 --documents eos &&
    train c2 2 "${ARGS[@]}" --cp 2 --documents eos &&
    train c4 4 "${ARGS[@]}" --cp 4 --documents eos &&
    train c2l 2 "${ARGS[@]}" --cp 2 --documents eos --attention-load-balance layer_local &&
    train none 1 "${ARGS[@]}" --cp 1 || fail "a run failed"
  ref=$(losses c1)
  for run in c2 c4 c2l; do
    d=$(maxdiff "$ref" "$(losses $run)")
    if awk -v d="$d" 'BEGIN { exit !(d != "steps differ" && d <= 1e-4) }'; then
      pass "$run agrees with cp 1 (max diff $d)"
    else
      fail "$run vs cp 1: max diff $d (tolerance 1e-4)"
    fi
  done
  d=$(maxdiff "$ref" "$(losses none)")
  awk -v d="$d" 'BEGIN { exit !(d != "steps differ" && d > 1e-3) }' &&
    pass "documents change the losses (max diff $d from the run without)" ||
    fail "documents eos gives the losses of documents none (max diff $d)"
  tokens=$(jq -r .tokens "$WORK/c1.jsonl" | head -1)
  [ -n "$tokens" ] && [ "$tokens" -lt 1000 ] && [ "$tokens" -gt 0 ] &&
    pass "step 1 counts $tokens of the 4 x 250 targets" ||
    fail "step 1 counts '$tokens' targets: expected fewer than 1000 (the documents' last ones left out)"
  n=$(grep -c "documents (ending with eos_token_id 10): step 1 has" "$WORK/c4.out")
  [ "$n" -eq 1 ] && pass "the start-up line once: $(grep -o 'step 1 has.*' "$WORK/c4.out")" ||
    fail "the documents line seen $n times at cp 4 (expected once)"
  ;;
megatron)
  megatron_write "$WORK/lines" u2 | sed 's/^/  /'
  jq 'del(.model.eos_token_id)' "$CONFIG" >"$WORK/no_eos.json"
  ARGS=(--seq-len 250 --steps 4 --dp 1 --cp 2 --documents eos)
  train u32 2 --config "$CONFIG" --data "$WORK/lines.u32" "${ARGS[@]}" &&
    train bin 2 --config "$WORK/no_eos.json" --data "$WORK/lines.bin" "${ARGS[@]}" &&
    train idx 2 --config "$WORK/no_eos.json" --data "$WORK/lines.idx" "${ARGS[@]}" &&
    train whole 2 --config "$CONFIG" --data "$WORK/lines.bin" --seq-len 250 --steps 4 --cp 2 ||
    fail "a run failed"
  [ -n "$(losses u32)" ] && [ "$(losses u32)" = "$(losses bin)" ] &&
    pass "the .bin/.idx trains bit-identically to the .u32 split at EOS" ||
    fail "the .bin/.idx losses differ from the .u32's: $(losses bin | tr '\n' ' ') vs $(losses u32 | tr '\n' ' ')"
  [ "$(losses idx)" = "$(losses bin)" ] && pass "naming the .idx opens the same dataset" ||
    fail "X.idx and X.bin train differently"
  [ "$(losses whole)" != "$(losses bin)" ] && pass "documents none on the .bin trains otherwise" ||
    fail "documents none gave the losses of documents eos"
  grep -q "Megatron dataset .*lines.idx (.* documents)" "$WORK/bin.out" &&
    pass "the start-up line names the Megatron dataset" || fail "no Megatron line in the output"
  grep -q "documents (from the dataset's index)" "$WORK/bin.out" &&
    pass "the documents come from the index" || fail "the documents line does not name the index"
  # int32 tokens (dtype code 4) read the same ids.
  megatron_write "$WORK/i4" i4 >/dev/null
  train i4 2 --config "$WORK/no_eos.json" --data "$WORK/i4.bin" "${ARGS[@]}" &&
    [ "$(losses i4)" = "$(losses bin)" ] && pass "an int32 .bin trains as the uint16 one" ||
    fail "the int32 .bin trains differently"
  ;;
refused)
  megatron_write "$WORK/m" u2 >/dev/null
  jq 'del(.model.eos_token_id)' "$CONFIG" >"$WORK/no_eos.json"
  RUN=(--config "$WORK/no_eos.json" --seq-len 250 --steps 1 --cp 2 --documents eos)
  # The .bin one token short of what the index says.
  mkdir -p "$WORK/short" && cp "$WORK/m.idx" "$WORK/short/m.idx"
  head -c -2 "$WORK/m.bin" >"$WORK/short/m.bin"
  bad "a .bin shorter than its index" "but the .bin has" 2 gdn_train "${RUN[@]}" \
    --data "$WORK/short/m.bin"
  # Sequence 3 said to start one token later.
  mkdir -p "$WORK/ptr" && cp "$WORK/m.bin" "$WORK/ptr/m.bin"
  python3 - "$WORK/m.idx" "$WORK/ptr/m.idx" <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
S = struct.unpack_from("<Q", d, 18)[0]
at = 34 + 4 * S + 8 * 3
struct.pack_into("<q", d, at, struct.unpack_from("<q", d, at)[0] + 2)
open(sys.argv[2], "wb").write(d)
EOF
  bad "a sequence offset the .bin does not have" "sequence 3 starts at byte" 2 gdn_train \
    "${RUN[@]}" --data "$WORK/ptr/m.bin"
  mkdir -p "$WORK/magic" && cp "$WORK/m.bin" "$WORK/magic/m.bin"
  { printf 'NOTANIDX!'; tail -c +10 "$WORK/m.idx"; } >"$WORK/magic/m.idx"
  bad "an index without the MMIDIDX magic" "does not start with MMIDIDX" 2 gdn_train "${RUN[@]}" \
    --data "$WORK/magic/m.bin"
  # Token 300 in a model of 256.
  mkdir -p "$WORK/vocab" && cp "$WORK/m.idx" "$WORK/vocab/m.idx" && cp "$WORK/m.bin" "$WORK/vocab/m.bin"
  printf '\x2c\x01' | dd of="$WORK/vocab/m.bin" bs=1 seek=20 conv=notrunc status=none
  bad "a token id outside the vocabulary" "the token at index 10 is 300, outside [0, 256)" 2 \
    gdn_train "${RUN[@]}" --data "$WORK/vocab/m.bin"
  bad "documents eos without eos_token_id" "but model.eos_token_id is not set" 2 gdn_train \
    "${RUN[@]}" --data "$TEXT"
  bad "documents of an unknown kind" "--documents lines" 2 gdn_train --config "$CONFIG" \
    --documents lines --steps 1 --cp 2
  bad "gdn_eval --documents eos without eos_token_id" "sets no eos_token_id" 2 gdn_eval \
    --init-from "$FIX" --tokens "$FIX/tokens.npy" --documents eos
  write_npy "$WORK/cu_short.npy" 3 0 5 20
  bad "gdn_eval --cu-seqlens that stops short" "expected boundaries from 0 to T = 23" 2 gdn_eval \
    --init-from "$FIX" --tokens "$FIX/tokens.npy" --cu-seqlens "$WORK/cu_short.npy"
  write_npy "$WORK/cu_down.npy" 4 0 9 5 23
  bad "gdn_eval --cu-seqlens that goes back" "a document starts at 5" 2 gdn_eval \
    --init-from "$FIX" --tokens "$FIX/tokens.npy" --cu-seqlens "$WORK/cu_down.npy"
  ;;
eval)
  # Boundaries on the cp = 3 shard edges (8, 16), one-token documents first and last.
  CU=(0 1 8 10 16 22 23)
  write_npy "$WORK/cu.npy" ${#CU[@]} "${CU[@]}"
  EVAL_ARGS=(--init-from "$FIX" --tokens "$FIX/tokens.npy" --dtype f64 --cu-seqlens "$WORK/cu.npy")
  ev() {  # ev NAME NP ARGS...: one gdn_eval run, its JSON line into $WORK/NAME.json
    local name=$1 np=$2
    shift 2
    timeout 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$BIN/gdn_eval" "$@" >"$WORK/$name.json" \
      2>"$WORK/$name.err" || { cat "$WORK/$name.err"; fail "gdn_eval $name failed"; }
  }
  ev p1 1 "${EVAL_ARGS[@]}"
  ev p2 2 "${EVAL_ARGS[@]}"
  ev p3 3 "${EVAL_ARGS[@]}"
  ev p3l 3 "${EVAL_ARGS[@]}" --attention-load-balance layer_local
  ref=$(jq -r .loss "$WORK/p1.json")
  for r in p2 p3 p3l; do
    l=$(jq -r .loss "$WORK/$r.json")
    awk -v a="$l" -v b="$ref" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-12 * b) }' &&
      pass "$r: loss $l agrees with cp 1" || fail "$r: loss $l vs $ref at cp 1 (1e-12)"
  done
  # Each document alone: its tokens, and the token after it when it ends the window.
  python3 - "$FIX/tokens.npy" "$WORK" "${CU[@]}" <<'EOF'
import sys
from npy_tool import read_int64, write_int64
path, work, cu = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
(B, T1), ids = read_int64(path)
n = 0
for b in range(B):
    row = ids[b * T1:(b + 1) * T1]
    for i in range(len(cu) - 1):
        s, e = cu[i], cu[i + 1]
        piece = row[s:e + 1] if i + 2 == len(cu) else row[s:e]
        if len(piece) < 2:
            continue  # a one-token document inside the window: no target
        write_int64("%s/doc%d.npy" % (work, n), (1, len(piece)), piece)
        n += 1
print(n)
EOF
  pieces=$(ls "$WORK"/doc*.npy | wc -l)
  for ((i = 0; i < pieces; i++)); do
    ev "doc$i" 1 --init-from "$FIX" --tokens "$WORK/doc$i.npy" --dtype f64
  done
  # The packed loss is the mean over all counted targets: sum(loss_d tokens_d) / sum(tokens_d).
  want=$(cat "$WORK"/doc[0-9]*.json | jq -s '(map(.loss * .tokens) | add) / (map(.tokens) | add)')
  count=$(cat "$WORK"/doc[0-9]*.json | jq -s 'map(.tokens) | add')
  got=$(jq -r .loss "$WORK/p1.json")
  [ "$(jq -r .tokens "$WORK/p1.json")" = "$count" ] &&
    pass "packed gdn_eval counts $count targets, the documents' sum" ||
    fail "packed gdn_eval counts $(jq -r .tokens "$WORK/p1.json") targets, the documents $count"
  awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-12 * b) }' &&
    pass "the packed loss $got is the documents' weighted sum $want" ||
    fail "packed loss $got vs the documents one by one $want (1e-12)"
  # --documents eos: with the config's eos_token_id set to row 0's token 9, the same loss
  # as --cu-seqlens at the boundaries after each of its occurrences (row 0 alone).
  mkdir -p "$WORK/eos"
  cp "$FIX/model.safetensors" "$WORK/eos/model.safetensors"
  eos=$(python3 - "$FIX/tokens.npy" "$WORK" <<'EOF2'
import sys
from npy_tool import read_int64, write_int64
(B, T1), ids = read_int64(sys.argv[1])
row = ids[:T1]
eos = row[9]
cu = [0] + [t + 1 for t in range(T1 - 2) if row[t] == eos] + [T1 - 1]
write_int64(sys.argv[2] + "/row0.npy", (1, T1), row)
write_int64(sys.argv[2] + "/cu_eos.npy", (len(cu),), cu)
assert row[T1 - 2] != eos  # the last input: its target counts either way
print(eos)
EOF2
)
  jq --argjson e "$eos" '.eos_token_id = $e' "$FIX/config.json" >"$WORK/eos/config.json"
  ROW=(--tokens "$WORK/row0.npy" --dtype f64)
  ev e3 3 --init-from "$WORK/eos" "${ROW[@]}" --documents eos
  ev c3 3 --init-from "$FIX" "${ROW[@]}" --cu-seqlens "$WORK/cu_eos.npy"
  l3=$(jq -r .loss "$WORK/e3.json") c3=$(jq -r .loss "$WORK/c3.json")
  [ -n "$l3" ] && [ "$l3" = "$c3" ] && [ "$(jq -r .tokens "$WORK/e3.json")" -lt 23 ] &&
    pass "--documents eos (id $eos) = --cu-seqlens at its boundaries: $l3, $(jq -r .tokens "$WORK/e3.json") targets" ||
    fail "--documents eos loss $l3 vs --cu-seqlens $c3"
  ;;
*)
  echo "test_documents.sh: unknown case '$CASE'" >&2
  exit 2
  ;;
esac
finish
