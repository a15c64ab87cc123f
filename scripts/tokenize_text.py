#!/usr/bin/env python3
"""Tokenizes text into a token file for gdn_train --data (not used by the tests):

  python3 scripts/tokenize_text.py --tokenizer tokenizer.json --in INPUT --out tokens.u32
      [--eos ID_OR_TOKEN | --no-eos] [--field text]

INPUT is one text file (one document), a JSONL file (*.jsonl: one document per line, its
text under --field, default "text"), or a folder (every *.txt / *.jsonl file in it and its
subfolders, in sorted order). Each document is encoded alone (no special tokens added) and
followed by the EOS token, as Megatron's preprocess_data.py --append-eod does, so that
gdn_train --documents eos (with model.eos_token_id set to the same id) trains each document
as an independent sequence. --eos takes an id or a token of the vocabulary; without it the
tokenizer's own end-of-text token is looked for (<|endoftext|>, </s>, <|im_end|>, <eos>).
--no-eos writes the documents back to back with nothing between them.

The tokenizer is a Hugging Face tokenizer.json (the `tokenizers` package). The output is a
raw little-endian stream of token ids and nothing else: uint16 when every id of the
vocabulary fits (vocabulary size <= 65536), else uint32. The file's name tells gdn_train
the format, so the extension written is the one that fits (.u16 or .u32); an --out with
the other one, or with none, is renamed with a note. A progress line on stderr counts the
documents, bytes and tokens; the summary gives the EOS id to put in the model config. Set
the model's vocab_size to at least the vocabulary size printed, or gdn_train refuses the file.
"""
import argparse
import array
import json
import os
import sys
import time

EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|im_end|>", "<eos>", "<|end_of_text|>")


def documents(path, field):
    """(name, text) of every document under path, in a fixed order."""
    if os.path.isdir(path):
        files = []
        for root, dirs, names in os.walk(path):
            dirs.sort()
            files += [os.path.join(root, n) for n in sorted(names)
                      if n.endswith(".txt") or n.endswith(".jsonl")]
        if not files:
            sys.exit(f"tokenize_text.py: folder {path} holds no .txt or .jsonl files")
    else:
        files = [path]
    for f in files:
        if f.endswith(".jsonl"):
            with open(f, encoding="utf-8") as lines:
                for n, line in enumerate(lines, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as e:
                        sys.exit(f"tokenize_text.py: {f} line {n} is not JSON: {e}")
                    if not isinstance(record, dict) or not isinstance(record.get(field), str):
                        sys.exit(f"tokenize_text.py: {f} line {n} has no string field "
                                 f"'{field}' (--field)")
                    yield f"{f}:{n}", record[field]
        else:
            with open(f, encoding="utf-8") as text:
                yield f, text.read()


def eos_id(tok, wanted):
    """The EOS id: --eos as an id or a token, else the tokenizer's end-of-text token."""
    vocab = tok.get_vocab_size(with_added_tokens=True)
    if wanted is not None:
        if wanted.isdigit():
            i = int(wanted)
            if i >= vocab:
                sys.exit(f"tokenize_text.py: --eos {i} is outside the vocabulary of {vocab}")
            return i
        i = tok.token_to_id(wanted)
        if i is None:
            sys.exit(f"tokenize_text.py: --eos '{wanted}' is not a token of the vocabulary")
        return i
    for t in EOS_CANDIDATES:
        i = tok.token_to_id(t)
        if i is not None:
            return i
    sys.exit("tokenize_text.py: the tokenizer has none of " + ", ".join(EOS_CANDIDATES) +
             ": give --eos ID_OR_TOKEN, or --no-eos")


class Progress:
    """One stderr line, rewritten at most every 0.5 s, and closed by done()."""

    def __init__(self, total_bytes):
        self.total, self.start, self.last = total_bytes, time.time(), 0.0

    def show(self, docs, nbytes, tokens, final=False):
        now = time.time()
        if not final and now - self.last < 0.5:
            return
        self.last = now
                pct = f"{min(100.0, 100.0 * nbytes / self.total):5.1f}% " if self.total and not final else ""
        rate = nbytes / max(now - self.start, 1e-9) / 1e6
        sys.stderr.write(f"\r{pct}{docs} documents, {nbytes / 1e6:.1f} MB, {tokens} tokens, "
                         f"{rate:.1f} MB/s")
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


def input_bytes(path):
    if not os.path.isdir(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(r, n)) for r, _, names in os.walk(path)
               for n in names if n.endswith(".txt") or n.endswith(".jsonl"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="Hugging Face tokenizer.json")
    ap.add_argument("--in", dest="inp", required=True,
                    help="a text file, a .jsonl file, or a folder of them")
    ap.add_argument("--out", required=True, help="token file to write (.u16 or .u32)")
    ap.add_argument("--eos", help="EOS token id or token text (default: the tokenizer's)")
    ap.add_argument("--no-eos", action="store_true", help="no EOS between documents")
    ap.add_argument("--field", default="text", help="the text field of .jsonl records")
    args = ap.parse_args()
    if args.no_eos and args.eos is not None:
        sys.exit("tokenize_text.py: --eos and --no-eos contradict each other")
    if not os.path.exists(args.inp):
        sys.exit(f"tokenize_text.py: --in {args.inp} does not exist")
    try:
        from tokenizers import Tokenizer  # imported here: only this script needs it
    except ImportError:
        sys.exit("tokenize_text.py: the 'tokenizers' package is not installed "
                 "(pip install tokenizers)")

    tok = Tokenizer.from_file(args.tokenizer)
    # get_vocab_size(with_added_tokens=True) counts the added (special) tokens too, which
    # may have the largest ids.
    vocab = tok.get_vocab_size(with_added_tokens=True)
    eos = None if args.no_eos else eos_id(tok, args.eos)
    width = "u16" if vocab <= 1 << 16 else "u32"

    out = args.out
    stem, ext = os.path.splitext(out)
    if ext != "." + width:
        out = (stem if ext in (".u16", ".u32") else out) + "." + width
        print(f"tokenize_text.py: ids need {width}: writing {out} instead of {args.out}",
              file=sys.stderr)
    tmp = out + ".tmp"
    progress = Progress(input_bytes(args.inp))
    ndocs = nbytes = ntokens = 0
    top = -1
    with open(tmp, "wb") as f:
        for _, text in documents(args.inp, args.field):
            ids = tok.encode(text, add_special_tokens=False).ids
            if eos is not None:
                ids.append(eos)
            top = max(top, max(ids, default=-1))
            data = array.array("H" if width == "u16" else "I", ids)
            if sys.byteorder != "little":
                data.byteswap()
            data.tofile(f)
            ndocs += 1
            nbytes += len(text.encode("utf-8"))
            ntokens += len(ids)
            progress.show(ndocs, nbytes, ntokens)
    progress.show(ndocs, nbytes, ntokens, final=True)
    if top >= vocab:
        os.remove(tmp)
        sys.exit(f"tokenize_text.py: id {top} is outside the vocabulary of {vocab}")
    os.replace(tmp, out)  # readers never see a half-written file
    end = f"each followed by EOS id {eos} (set model.eos_token_id to it for --documents eos)" \
        if eos is not None else "back to back, no EOS"
    print(f"{ndocs} documents, {ntokens} tokens ({width}, vocabulary {vocab}, largest id {top}) "
          f"-> {out}; {end}")


if __name__ == "__main__":
    main()
