#!/usr/bin/env bash
# scripts/tokenize_text.py with the tiny byte-level BPE tokenizer of tests/fixtures/tokenizer
# (320 ids, <|endoftext|> = 319; scripts/make_tokenizer_fixture.py made it), one case per
# ctest entry:
#
#   encode  a text file, a JSONL file and a nested folder of .txt and .jsonl files (with a
#           file of another kind left out): the .u16 written is, little-endian, what the
#           tokenizer itself gives each document (encoded here alone, add_special_tokens
#           False) followed by the EOS id, the documents in the order docs/usage.md gives
#           (a folder's own files by name, then its subfolders by name: the order is written
#           out below, not computed); also --eos by id, --no-eos and an --out of .u32
#           renamed to .u16
#   errors  a tokenizer file missing, unreadable, not JSON, not a tokenizer, truncated;
#           input not UTF-8 (a text file: the byte offset; a JSONL: the line), JSONL not JSON
#           or without the field; an --out whose folder is missing, is a file, is not
#           writable: exit 1, one line on stderr naming the file, no traceback, no .tmp left
#           and an existing --out untouched
#   train   the shipped text's paragraphs as JSONL documents, tokenized, train 4 steps of
#           gdn_train --documents eos at cp 2 (configs/tiny.json with vocab_size 320 and
#           eos_token_id 319): exit 0, a finite loss at every step, the documents line
#
# The tokenizers package comes from the tools' venv .venv-tools/ (scripts/lib/tools_venv.sh,
# made by scripts/setup.sh); where it is missing the test makes it, and exits 77 (skip),
# saying why, only when it cannot (no PyPI).
#
#   test_tokenize.sh BIN_DIR MPIEXEC SOURCE_DIR CASE
set -uo pipefail
source "$(dirname "$0")/common.sh"
case_args "$@"
source "$SRC/scripts/lib/tools_venv.sh"
SCRIPT=$SRC/scripts/tokenize_text.py
TOK=$SRC/tests/fixtures/tokenizer/tokenizer.json
VENV=$(tools_venv_dir)
if ! tools_venv_ok "$VENV"; then
  if ! why=$(tools_venv_make "$VENV"); then
    echo "SKIP: $why"
    exit 77
  fi
  echo "$VENV was missing: ready now (tokenizers==$TOOLS_VENV_TOKENIZERS)"
fi
PY=$VENV/bin/python
WORK=$(mktemp -d)
trap 'chmod -R u+rwx "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT

# DROP: a prefix that runs a command without root's permission overrides, so that file
# modes hold: as root, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH leave the bounding set (the
# user stays root, so everything readable stays so); nothing for another user.
DROP=()
[ "$(id -u)" -eq 0 ] && DROP=(setpriv --bounding-set=-dac_override,-dac_read_search --)
# can_drop: true when DROP works here (a mode-555 folder is then not writable).
can_drop() {
  mkdir -p "$WORK/probe" && chmod 555 "$WORK/probe"
  "${DROP[@]}" true 2>/dev/null && ! "${DROP[@]}" test -w "$WORK/probe"
}

# tokenize NAME ARGS...: the script with the fixture tokenizer (under DROP when UNPRIV=1),
# stdout and stderr into $WORK/NAME.out and .err; its exit status.
tokenize() {
  local name=$1 pre=()
  shift
  [ "${UNPRIV:-0}" = 1 ] && pre=("${DROP[@]}")
  timeout 120 "${pre[@]}" "$PY" "$SCRIPT" --tokenizer "$TOK" "$@" >"$WORK/$name.out" \
    2>"$WORK/$name.err"
}

# expect_ids NAME FILE EOS DOCS.json: FILE holds, as uint16 little-endian, each document of
# the JSON list DOCS.json encoded alone by the tokenizer and followed by EOS (none: no EOS).
# The oracle: the tokenizers package called here, not the script.
expect_ids() {
  local name=$1 file=$2 eos=$3 docs=$4 why
  if why=$("$PY" - "$TOK" "$file" "$eos" "$docs" 2>&1 <<'EOF'
import json, struct, sys
from tokenizers import Tokenizer
tok_path, path, eos, docs = sys.argv[1:]
tok = Tokenizer.from_file(tok_path)
want = []
for text in json.load(open(docs, encoding="utf-8")):
    want += tok.encode(text, add_special_tokens=False).ids
    if eos != "none":
        want.append(int(eos))
data = open(path, "rb").read()
if len(data) % 2:
    sys.exit(f"{len(data)} bytes: not a whole number of uint16")
got = list(struct.unpack("<%dH" % (len(data) // 2), data))
if got != want:
    i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    sys.exit(f"{len(got)} ids, expected {len(want)}; first difference at index {i}: "
             f"{got[i:i + 5]} instead of {want[i:i + 5]}")
print(f"{len(got)} ids")
EOF
  ); then
    pass "$name: the ids are the tokenizer's ($why)"
  else
    fail "$name: $why"
  fi
}

# refused NAME PHRASE ARGS...: the script exits 1 with exactly one line on stderr, which
# starts with "tokenize_text.py: " and holds PHRASE (the file it names), and no traceback;
# its --out (the last argument) is left as it was and no .tmp is left beside it.
refused() {
  local name=$1 phrase=$2 rc lines out=${*: -1}
  shift 2
  [ -e "$out" ] && cp "$out" "$WORK/before"
  tokenize refused "$@"
  rc=$?
  lines=$(grep -c . "$WORK/refused.err")
  if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -q "^tokenize_text.py: " "$WORK/refused.err" &&
    grep -qF -- "$phrase" "$WORK/refused.err" && ! grep -q Traceback "$WORK/refused.err"; then
    pass "$name: exit 1, $(cat "$WORK/refused.err")"
  else
    sed 's/^/  | /' "$WORK/refused.err"
    fail "$name: exit $rc, $lines lines on stderr (expected exit 1 and one line holding '$phrase')"
  fi
  if ls "$(dirname "$out")"/*.tmp >/dev/null 2>&1; then
    fail "$name: left $(ls "$(dirname "$out")"/*.tmp)"
    rm -f "$(dirname "$out")"/*.tmp
  fi
  if [ -e "$WORK/before" ]; then
    cmp -s "$out" "$WORK/before" || fail "$name: the existing $out was changed"
    rm -f "$WORK/before"
  elif [ -e "$out" ]; then
    fail "$name: wrote $out"
  fi
}

case "$CASE" in
encode)
  # One text file: non-ASCII text, a CRLF and a trailing space kept byte for byte.
  printf 'The \xc2\xabd\xc3\xa9j\xc3\xa0 vu\xc2\xbb of it,\r\nsaid Tom \xf0\x9f\x98\x80 \n' >"$WORK/one.txt"
  "$PY" -c 'import json, sys; json.dump([open(sys.argv[1], "rb").read().decode()], open(sys.argv[2], "w"))' \
    "$WORK/one.txt" "$WORK/one.docs"
  tokenize one --in "$WORK/one.txt" --out "$WORK/one.u16" &&
    pass "a text file: $(cat "$WORK/one.out")" || { cat "$WORK/one.err"; fail "a text file failed"; }
  expect_ids "a text file" "$WORK/one.u16" 319 "$WORK/one.docs"
  grep -q "each followed by EOS id 319" "$WORK/one.out" && pass "the summary names EOS id 319" ||
    fail "the summary does not name EOS id 319: $(cat "$WORK/one.out")"

  # One JSONL file: a blank line skipped, another field ignored, escapes, an empty text.
  cat >"$WORK/docs.jsonl" <<'EOF'
{"text": "First document.\nIt has two lines."}

{"id": 7, "text": "caf\u00e9 \ud83d\ude00 \"quoted\"", "other": "not this"}
{"text": ""}
{"text": "  leading spaces and a tab\t"}
EOF
  cat >"$WORK/docs.docs" <<'EOF'
["First document.\nIt has two lines.", "caf\u00e9 \ud83d\ude00 \"quoted\"", "", "  leading spaces and a tab\t"]
EOF
  tokenize jsonl --in "$WORK/docs.jsonl" --out "$WORK/docs.u16" &&
    pass "a JSONL file: $(cat "$WORK/jsonl.out")" || { cat "$WORK/jsonl.err"; fail "a JSONL file failed"; }
  expect_ids "a JSONL file" "$WORK/docs.u16" 319 "$WORK/docs.docs"
  # --field picks another field.
  printf '{"body": "by another name", "text": "not this"}\n' >"$WORK/field.jsonl"
  echo '["by another name"]' >"$WORK/field.docs"
  tokenize field --in "$WORK/field.jsonl" --out "$WORK/field.u16" --field body ||
    { cat "$WORK/field.err"; fail "--field body failed"; }
  expect_ids "--field body" "$WORK/field.u16" 319 "$WORK/field.docs"

  # A folder: its own files first (a.jsonl, b.txt; notes.md is not text input), then its
  # subfolders by name: a/ (z.txt), c/ (x.txt, then c/d/: y.jsonl). Sorting whole paths
  # instead would put a/z.txt before b.txt, and a walk without sorting may go anywhere.
  C=$WORK/corpus
  mkdir -p "$C/c/d" "$C/a"
  printf '{"text": "alpha one"}\n{"text": "alpha two"}\n' >"$C/a.jsonl"
  printf 'bravo text\n' >"$C/b.txt"
  printf 'not input' >"$C/notes.md"
  printf 'zulu in a/' >"$C/a/z.txt"
  printf 'x-ray in c/\n\n' >"$C/c/x.txt"
  printf '{"text": "yankee one"}\n\n{"text": "yankee two"}\n' >"$C/c/d/y.jsonl"
  cat >"$WORK/corpus.docs" <<'EOF'
["alpha one", "alpha two", "bravo text\n", "zulu in a/", "x-ray in c/\n\n", "yankee one", "yankee two"]
EOF
  tokenize folder --in "$C" --out "$WORK/corpus.u16" &&
    pass "a folder: $(cat "$WORK/folder.out")" || { cat "$WORK/folder.err"; fail "a folder failed"; }
  expect_ids "a folder" "$WORK/corpus.u16" 319 "$WORK/corpus.docs"
  grep -q "^7 documents" "$WORK/folder.out" && pass "the folder holds 7 documents" ||
    fail "the folder's summary: $(cat "$WORK/folder.out")"

  # --eos by id, --no-eos, and an --out of .u32 written as .u16 with a note.
  tokenize eos10 --in "$C" --out "$WORK/eos10.u16" --eos 10 || fail "--eos 10 failed"
  expect_ids "--eos 10" "$WORK/eos10.u16" 10 "$WORK/corpus.docs"
  tokenize noeos --in "$C" --out "$WORK/noeos.u16" --no-eos || fail "--no-eos failed"
  expect_ids "--no-eos" "$WORK/noeos.u16" none "$WORK/corpus.docs"
  tokenize u32 --in "$C" --out "$WORK/wide.u32" || fail "--out .u32 failed"
  if [ -e "$WORK/wide.u16" ] && [ ! -e "$WORK/wide.u32" ] &&
    grep -q "ids need u16: writing $WORK/wide.u16 instead of $WORK/wide.u32" "$WORK/u32.err"; then
    pass "--out wide.u32 is written as wide.u16, with a note"
  else
    fail "--out wide.u32: $(ls "$WORK" | grep wide) / $(cat "$WORK/u32.err")"
  fi
  cmp -s "$WORK/wide.u16" "$WORK/corpus.u16" && pass "wide.u16 holds the same ids" ||
    fail "wide.u16 differs from corpus.u16"
  ls "$WORK"/*.tmp >/dev/null 2>&1 && fail "a .tmp was left: $(ls "$WORK"/*.tmp)"
  ;;
errors)
  D=$WORK/in
  mkdir -p "$D" "$WORK/out"
  printf 'plain text\n' >"$D/ok.txt"
  OUT=$WORK/out/tokens.u16
  refused "a tokenizer file that does not exist" "--tokenizer $WORK/nope.json" \
    --tokenizer "$WORK/nope.json" --in "$D/ok.txt" --out "$OUT"
  refused "a folder as the tokenizer" "--tokenizer $WORK" \
    --tokenizer "$WORK" --in "$D/ok.txt" --out "$OUT"
  if can_drop; then
    cp "$TOK" "$WORK/locked.json" && chmod 000 "$WORK/locked.json"
    UNPRIV=1 refused "an unreadable tokenizer file (mode 000)" \
      "cannot read --tokenizer $WORK/locked.json" \
      --tokenizer "$WORK/locked.json" --in "$D/ok.txt" --out "$OUT"
  else
    echo "note: root's permission overrides cannot be dropped here (setpriv): no mode-000 case"
  fi
  printf 'not json at all\n' >"$WORK/text.json"
  refused "a tokenizer file that is not JSON" \
    "--tokenizer $WORK/text.json is not a Hugging Face tokenizer.json" \
    --tokenizer "$WORK/text.json" --in "$D/ok.txt" --out "$OUT"
  echo '{"version": "1.0", "model": {"type": "Nothing"}}' >"$WORK/other.json"
  refused "JSON that is not a tokenizer" \
    "--tokenizer $WORK/other.json is not a Hugging Face tokenizer.json" \
    --tokenizer "$WORK/other.json" --in "$D/ok.txt" --out "$OUT"
  head -c 4000 "$TOK" >"$WORK/cut.json"
  refused "a truncated tokenizer.json" "--tokenizer $WORK/cut.json is not a Hugging Face" \
    --tokenizer "$WORK/cut.json" --in "$D/ok.txt" --out "$OUT"
  printf '\xff\xfe binary' >"$WORK/latin.json"
  refused "a tokenizer file that is not UTF-8" "--tokenizer $WORK/latin.json is not a Hugging" \
    --tokenizer "$WORK/latin.json" --in "$D/ok.txt" --out "$OUT"

  # Input that is not UTF-8, after good documents (so the .tmp has been written to): a
  # Latin-1 e-acute at byte 9 of a text file; line 3 of a JSONL, at byte 30 of the file.
  printf 'caf\xc3\xa9 ok\ncaf\xe9 no\n' >"$WORK/latin1.txt"
  refused "a text file that is not UTF-8" "$WORK/latin1.txt is not UTF-8: byte 0xe9 at byte offset 12" \
    --in "$WORK/latin1.txt" --out "$OUT"
  printf '{"text": "a"}\n{"text": "b"}\n{"text": "\xe9"}\n' >"$WORK/latin1.jsonl"
  refused "a JSONL line that is not UTF-8" "$WORK/latin1.jsonl line 3 is not UTF-8: byte 0xe9 at byte offset 38" \
    --in "$WORK/latin1.jsonl" --out "$OUT"
  mkdir -p "$WORK/mixed/z" && cp "$D/ok.txt" "$WORK/mixed/a.txt" &&
    cp "$WORK/latin1.txt" "$WORK/mixed/z/b.txt"
  refused "a folder with a file that is not UTF-8" "$WORK/mixed/z/b.txt is not UTF-8" \
    --in "$WORK/mixed" --out "$OUT"
  printf '{"text": "a"}\n{"text": \n' >"$WORK/broken.jsonl"
  refused "a JSONL line that is not JSON" "$WORK/broken.jsonl line 2 is not JSON" \
    --in "$WORK/broken.jsonl" --out "$OUT"
  printf '{"text": "a"}\n{"body": "b"}\n' >"$WORK/nofield.jsonl"
  refused "a JSONL line without the field" "$WORK/nofield.jsonl line 2 has no string field 'text'" \
    --in "$WORK/nofield.jsonl" --out "$OUT"
  # An existing --out is left as it was when a run fails.
  printf 'old tokens' >"$OUT"
  refused "a failed run over an existing --out" "$WORK/latin1.txt is not UTF-8" \
    --in "$WORK/latin1.txt" --out "$OUT"
  rm -f "$OUT"

  refused "an --out whose folder does not exist" "--out $WORK/missing/t.u16: its folder $WORK/missing does not exist" \
    --in "$D/ok.txt" --out "$WORK/missing/t.u16"
  refused "an --out under a file" "--out $D/ok.txt/t.u16: $D/ok.txt is not a folder" \
    --in "$D/ok.txt" --out "$D/ok.txt/t.u16"
  if can_drop; then
    mkdir -p "$WORK/ro" && chmod 555 "$WORK/ro"
    UNPRIV=1 refused "an --out in a folder that is not writable (mode 555)" \
      "cannot write --out $WORK/ro/t.u16: Permission denied" --in "$D/ok.txt" --out "$WORK/ro/t.u16"
  else
    echo "note: root's permission overrides cannot be dropped here (setpriv): no mode-555 case"
  fi
  ;;
train)
  # The text's paragraphs (blank-line separated) as JSONL documents.
  "$PY" - "$SRC/data/public_domain.txt" "$WORK/paragraphs.jsonl" <<'EOF'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for p in text.split("\n\n"):
        if p.strip():
            f.write(json.dumps({"text": p.strip() + "\n"}) + "\n")
EOF
  tokenize para --in "$WORK/paragraphs.jsonl" --out "$WORK/para.u16" &&
    pass "tokenized: $(cat "$WORK/para.out")" || { cat "$WORK/para.err"; fail "tokenizing failed"; }
  jq '.model.vocab_size = 320 | .model.eos_token_id = 319' "$SRC/configs/tiny.json" >"$WORK/tiny.json"
  if timeout 300 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$BIN/gdn_train" --config "$WORK/tiny.json" \
    --data "$WORK/para.u16" --documents eos --cp 2 --dp 1 --seq-len 128 --steps 4 \
    --log "$WORK/train.jsonl" >"$WORK/train.out" 2>&1; then
    pass "gdn_train --documents eos at cp 2 on the tokens: exit 0"
  else
    rc=$?
    tail -n 30 "$WORK/train.out"
    fail "gdn_train --documents eos on the tokens: exit $rc"
  fi
  n=$(jq -s '[.[] | select(.loss | type == "number" and (isnan | not) and (isinfinite | not))] | length' \
    "$WORK/train.jsonl" 2>/dev/null)
  [ "${n:-0}" -eq 4 ] && pass "4 steps logged, each with a finite loss: $(jq -r .loss "$WORK/train.jsonl" | tr '\n' ' ')" ||
    fail "finite losses logged: ${n:-none} of 4 ($(cat "$WORK/train.jsonl" 2>/dev/null | head -c 400))"
  grep -q "documents (ending with eos_token_id 319): step 1 has" "$WORK/train.out" &&
    pass "the documents line: $(grep -o 'step 1 has.*' "$WORK/train.out" | head -1)" ||
    fail "no documents line for eos_token_id 319 in gdn_train's output"
  ;;
*)
  echo "test_tokenize.sh: unknown case '$CASE'" >&2
  exit 2
  ;;
esac
finish
