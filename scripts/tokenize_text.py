#!/usr/bin/env python3
"""Tokenizes a text file into a token file for gdn_train --data (not used by the tests):

  python3 scripts/tokenize_text.py --tokenizer tokenizer.json --in text.txt --out tokens.u32

The tokenizer is a Hugging Face tokenizer.json (the `tokenizers` package). The output is a
raw little-endian stream of token ids and nothing else: uint16 when every id of the
vocabulary fits (vocabulary size <= 65536), else uint32. The file's name tells gdn_train
the format, so the extension written is the one that fits (.u16 or .u32); an --out with
the other one, or with none, is renamed with a note. Prints the token count.

The whole text is encoded as one stream (no special tokens added); set the model's
vocab_size to at least the vocabulary size printed, or gdn_train refuses the file.
"""
import argparse
import array
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="Hugging Face tokenizer.json")
    ap.add_argument("--in", dest="inp", required=True, help="UTF-8 text file")
    ap.add_argument("--out", required=True, help="token file to write (.u16 or .u32)")
    args = ap.parse_args()
    try:
        from tokenizers import Tokenizer  # imported here: only this script needs it
    except ImportError:
        sys.exit("tokenize_text.py: the 'tokenizers' package is not installed "
                 "(pip install tokenizers)")

    tok = Tokenizer.from_file(args.tokenizer)
    # get_vocab_size(with_added_tokens=True) counts the added (special) tokens too, which
    # may have the largest ids.
    vocab = tok.get_vocab_size(with_added_tokens=True)
    with open(args.inp, encoding="utf-8") as f:
        text = f.read()
    ids = tok.encode(text, add_special_tokens=False).ids
    top = max(ids, default=-1)
    width = "u16" if max(vocab, top + 1) <= 1 << 16 else "u32"

    out = args.out
    stem, ext = os.path.splitext(out)
    if ext != "." + width:
        out = (stem if ext in (".u16", ".u32") else out) + "." + width
        print(f"tokenize_text.py: ids need {width}: writing {out} instead of {args.out}",
              file=sys.stderr)
    data = array.array("H" if width == "u16" else "I", ids)
    assert data.itemsize == (2 if width == "u16" else 4)
    if sys.byteorder != "little":
        data.byteswap()
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        data.tofile(f)
    os.replace(tmp, out)  # readers never see a half-written file
    print(f"{len(ids)} tokens ({width}, vocabulary {vocab}, largest id {top}) -> {out}")


if __name__ == "__main__":
    main()
