#!/usr/bin/env python3
"""Tokenizes text into a token file for gdn_train --data:

  python3 scripts/tokenize_text.py --tokenizer tokenizer.json --in INPUT --out tokens.u32
      [--eos ID_OR_TOKEN | --no-eos] [--field text]

INPUT is one text file (one document), a JSONL file (*.jsonl: one document per line, its
text under --field, default "text"; blank lines are skipped), or a folder: every *.txt and
*.jsonl file in it and in its subfolders, a folder's own files first, by name, then each of
its subfolders, by name, the same way (names in code-point order, as Python sorts them).
Each document is encoded alone (no special tokens added) and followed by the EOS token, as
Megatron's preprocess_data.py --append-eod does, so that gdn_train --documents eos (with
model.eos_token_id set to the same id) trains each document as an independent sequence.
--eos takes an id or a token of the vocabulary; without it the tokenizer's own end-of-text
token is looked for (<|endoftext|>, </s>, <|im_end|>, <eos>, <|end_of_text|>). --no-eos
writes the documents back to back with nothing between them. Text is read as UTF-8, byte
for byte (a text file's line endings are kept as they are).

The tokenizer is a Hugging Face tokenizer.json (the `tokenizers` package; scripts/setup.sh
puts it in the venv .venv-tools/). The output is a raw little-endian stream of token ids
and nothing else: uint16 when every id of the vocabulary fits (vocabulary size <= 65536),
else uint32. The file's name tells gdn_train the format, so the extension written is the
one that fits (.u16 or .u32); an --out with the other one, or with none, is renamed with a
note. It is written as OUT.tmp and renamed when complete; on any failure OUT.tmp is removed
and OUT left as it was. A progress line on stderr counts the documents, bytes and tokens
(rewritten in place on a terminal, a plain line every 10 s otherwise); the summary gives
the EOS id to put in the model config. Set the model's vocab_size to at least the
vocabulary size printed, or gdn_train refuses the file.

Bad input ends the run with exit status 1 and one line on stderr that names the file: a
tokenizer file that cannot be read or is not a tokenizer.json, an input that is not UTF-8
(the byte offset, and for JSONL the line), a JSONL line that is not JSON or lacks --field,
an --out whose folder is missing or not writable. tests/cli/test_tokenize.sh checks the
ids against the tokenizer's own encoding and each of these messages.
"""
import argparse
import array
import json
import os
import sys
import time

EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|im_end|>", "<eos>", "<|end_of_text|>")
INPUT_EXTENSIONS = (".txt", ".jsonl")


class Progress:
    """The progress line on stderr: on a terminal one line rewritten at most every 0.5 s,
    otherwise a plain line every 10 s; done() ends it."""

    def __init__(self, total_bytes):
        self.total, self.start, self.last = total_bytes, time.time(), 0.0
        self.tty = sys.stderr.isatty()
        self.open = False  # a rewritten line is on the terminal, not yet ended

    def show(self, docs, nbytes, tokens, final=False):
        now = time.time()
        if not final and now - self.last < (0.5 if self.tty else 10.0):
            return
        if not final and not self.tty and self.last == 0.0:
            self.last = now  # the first plain line after 10 s, not at once
            return
        self.last = now
        pct = f"{min(100.0, 100.0 * nbytes / self.total):5.1f}% " \
            if self.total and not final else ""
        rate = nbytes / max(now - self.start, 1e-9) / 1e6
        line = (f"{pct}{docs} documents, {nbytes / 1e6:.1f} MB, {tokens} tokens, "
                f"{rate:.1f} MB/s")
        if self.tty:
            sys.stderr.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
            self.open = not final
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def end_line(self):
        """Ends a rewritten line, so that what follows starts a line of its own."""
        if self.open:
            sys.stderr.write("\n")
            self.open = False


PROGRESS = None


def die(message):
    """Exit 1 with one line on stderr: tokenize_text.py: MESSAGE."""
    if PROGRESS is not None:
        PROGRESS.end_line()
    sys.exit(f"tokenize_text.py: {message}")


def first_line(error):
    """The first line of an exception's message (the tokenizers errors can run on)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def input_files(path):
    """The files of --in, in the documented order."""
    if not os.path.isdir(path):
        return [path]
    files = []
    for root, dirs, names in os.walk(path):
        dirs.sort()  # os.walk visits the subfolders in this list's order
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(INPUT_EXTENSIONS)]
    if not files:
        die(f"folder {path} holds no .txt or .jsonl files")
    return files


def input_bytes(files):
    try:
        return sum(os.path.getsize(p) for p in files)
    except OSError as e:
        die(f"cannot read {e.filename}: {e.strerror}")


def not_utf8(error, data, where):
    """The message for a UnicodeDecodeError of data at byte offset where[1] of file where[0]."""
    f, base, line = where
    bad = data[error.start:error.start + 1].hex()
    at = f"line {line} is" if line else "is"
    return (f"{f} {at} not UTF-8: byte 0x{bad} at byte offset {base + error.start} "
            f"({error.reason})")


def documents(files, field):
    """(name, text) of every document of files, in order."""
    for f in files:
        try:
            handle = open(f, "rb")
        except OSError as e:
            die(f"cannot read {f}: {e.strerror}")
        with handle:
            try:
                if f.endswith(".jsonl"):
                    offset = 0
                    for n, raw in enumerate(handle, 1):
                        try:
                            line = raw.decode("utf-8")
                        except UnicodeDecodeError as e:
                            die(not_utf8(e, raw, (f, offset, n)))
                        offset += len(raw)
                        if not line.strip():
                            continue
                        try:
                            record = json.loads(line)
                        except json.JSONDecodeError as e:
                            die(f"{f} line {n} is not JSON: {e}")
                        if not isinstance(record, dict) or not isinstance(record.get(field), str):
                            die(f"{f} line {n} has no string field '{field}' (--field)")
                        yield f"{f} line {n}", record[field]
                else:
                    data = handle.read()
                    try:
                        text = data.decode("utf-8")
                    except UnicodeDecodeError as e:
                        die(not_utf8(e, data, (f, 0, 0)))
                    yield f, text
            except OSError as e:  # a read error after the open (EIO, a folder named x.txt)
                die(f"cannot read {f}: {e.strerror}")


def load_tokenizer(path):
    try:
        from tokenizers import Tokenizer  # imported here: only this script needs it
    except ImportError:
        die("the 'tokenizers' package is not installed (scripts/setup.sh puts it in "
            ".venv-tools/: run this script with .venv-tools/bin/python, or pip install "
            "tokenizers)")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        die(f"cannot read --tokenizer {path}: {e.strerror}")
    try:
        return Tokenizer.from_str(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        die(f"--tokenizer {path} is not a Hugging Face tokenizer.json: not UTF-8 at byte "
            f"offset {e.start}")
    except Exception as e:  # tokenizers raises plain Exception for a bad file
        die(f"--tokenizer {path} is not a Hugging Face tokenizer.json: {first_line(e)}")


def eos_id(tok, wanted):
    """The EOS id: --eos as an id or a token, else the tokenizer's end-of-text token."""
    vocab = tok.get_vocab_size(with_added_tokens=True)
    if wanted is not None:
        if wanted.isdigit():
            i = int(wanted)
            if i >= vocab:
                die(f"--eos {i} is outside the vocabulary of {vocab}")
            return i
        i = tok.token_to_id(wanted)
        if i is None:
            die(f"--eos '{wanted}' is not a token of the vocabulary")
        return i
    for t in EOS_CANDIDATES:
        i = tok.token_to_id(t)
        if i is not None:
            return i
    die("the tokenizer has none of " + ", ".join(EOS_CANDIDATES) +
        ": give --eos ID_OR_TOKEN, or --no-eos")


def open_out(out, given):
    """OUT.tmp opened for writing, or one line saying why --out cannot be written."""
    tmp = out + ".tmp"
    folder = os.path.dirname(os.path.abspath(out))
    try:
        return tmp, open(tmp, "wb")
    except OSError as e:
        if not os.path.exists(folder):
            why = f"its folder {folder} does not exist"
        elif not os.path.isdir(folder):
            why = f"{folder} is not a folder"
        else:
            why = f"{e.strerror} ({tmp})"
        die(f"cannot write --out {given}: {why}")


def main():
    global PROGRESS
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
        die("--eos and --no-eos contradict each other")
    if not os.path.exists(args.inp):
        die(f"--in {args.inp} does not exist")

    tok = load_tokenizer(args.tokenizer)
    # get_vocab_size(with_added_tokens=True) counts the added (special) tokens too, which
    # may have the largest ids.
    vocab = tok.get_vocab_size(with_added_tokens=True)
    eos = None if args.no_eos else eos_id(tok, args.eos)
    width = "u16" if vocab <= 1 << 16 else "u32"
    files = input_files(args.inp)
    total = input_bytes(files)

    out = args.out
    stem, ext = os.path.splitext(out)
    if ext != "." + width:
        out = (stem if ext in (".u16", ".u32") else out) + "." + width
        print(f"tokenize_text.py: ids need {width}: writing {out} instead of {args.out}",
              file=sys.stderr)
    tmp, f = open_out(out, args.out)
    ndocs = nbytes = ntokens = 0
    top = -1
    try:
        with f:
            PROGRESS = Progress(total)
            for name, text in documents(files, args.field):
                try:
                    ids = tok.encode(text, add_special_tokens=False).ids
                except Exception as e:
                    die(f"{name}: the tokenizer fails on it: {first_line(e)}")
                if eos is not None:
                    ids.append(eos)
                top = max(top, max(ids, default=-1))
                data = array.array("H" if width == "u16" else "I", ids)
                if sys.byteorder != "little":
                    data.byteswap()
                try:
                    data.tofile(f)
                except OSError as e:
                    die(f"cannot write --out {args.out}: {e.strerror} ({tmp})")
                ndocs += 1
                nbytes += len(text.encode("utf-8"))
                ntokens += len(ids)
                PROGRESS.show(ndocs, nbytes, ntokens)
            PROGRESS.show(ndocs, nbytes, ntokens, final=True)
            if top >= vocab:
                die(f"id {top} is outside the vocabulary of {vocab}")
        os.replace(tmp, out)  # readers never see a half-written file
    except OSError as e:  # closing (flushing) or renaming
        try:
            os.remove(tmp)
        except OSError:
            pass
        die(f"cannot write --out {args.out}: {e.strerror} ({tmp})")
    except BaseException:  # an error above, Ctrl-C: no half-written OUT.tmp left behind
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    end = f"each followed by EOS id {eos} (set model.eos_token_id to it for --documents eos)" \
        if eos is not None else "back to back, no EOS"
    print(f"{ndocs} documents, {ntokens} tokens ({width}, vocabulary {vocab}, largest id {top}) "
          f"-> {out}; {end}")


if __name__ == "__main__":
    main()
