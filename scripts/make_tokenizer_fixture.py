#!/usr/bin/env python3
"""Builds tests/fixtures/tokenizer/tokenizer.json, the tiny tokenizer of tests/cli/test_tokenize.sh.

Run by hand (never by the tests or CI, which only read the committed file), with the tools'
venv that scripts/setup.sh makes (tokenizers pinned in scripts/lib/tools_venv.sh):

    .venv-tools/bin/python scripts/make_tokenizer_fixture.py [--out tests/fixtures/tokenizer]

It trains a byte-level BPE tokenizer, as GPT-2's and Qwen's are, on data/public_domain.txt
(committed, so the input never changes): the 256 byte tokens and merges up to 319 ids,
then the special token <|endoftext|> added last, id 319 = VOCAB - 1, as GPT-2's 50256 is
(an added token, the largest id, so a wrong or lost EOS shows in the ids). Being
byte-level, it encodes every UTF-8 text with no unknown token. Training is deterministic
(run it twice: the same bytes); the file is ~9 KB. The vocabulary fits uint16, so
tokenize_text.py writes .u16.
"""
import argparse
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB = 320
EOS = "<|endoftext|>"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "tokenizer"),
                    help="folder to write tokenizer.json into")
    args = ap.parse_args()
    text = os.path.join(root, "data", "public_domain.txt")

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([text], trainer)
    tok.add_special_tokens([EOS])

    vocab = tok.get_vocab_size(with_added_tokens=True)
    if vocab != VOCAB or tok.token_to_id(EOS) != VOCAB - 1:
        sys.exit(f"make_tokenizer_fixture.py: trained {vocab} ids, {EOS} id "
                 f"{tok.token_to_id(EOS)}: expected {VOCAB}, the EOS last")
    sample = "Tokenizers, naïvely: «déjà vu» 😀\n"
    if tok.decode(tok.encode(sample).ids) != sample:
        sys.exit("make_tokenizer_fixture.py: the tokenizer does not round-trip UTF-8 text")
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, "tokenizer.json")
    tok.save(out, pretty=True)
    print(f"{out}: {vocab} ids, {EOS} = {tok.token_to_id(EOS)}, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
