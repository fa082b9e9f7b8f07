#!/usr/bin/env python3
"""Reference GPT-2 token ids for the tokenizer tests, from an implementation independent of ours.

Backends, in order of preference for --backend auto:
  tiktoken    tiktoken's Rust BPE, built offline from the local encoder.json + vocab.bpe
  tokenizers  Hugging Face tokenizers, from the local tokenizer.json
  encoder     OpenAI's published encoder.py algorithm (bytes_to_unicode, get_pairs, bpe by
              rank, the GPT-2 pattern through the `regex` module: Debian's python3-regex)
Input files are read as bytes and decoded with errors="replace", as the references must be.

Usage: gpt2_tokenizer_reference.py --tokenizer_dir DIR [--backend B] [--special] [--lines] FILE OUT
  writes the ids of FILE (whole, or each line when --lines) to OUT as text: one line of
  space-separated ids per input (exit 3 when the requested backend is unavailable).
"""
import argparse
import json
import os
import sys

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def get_pairs(word):
    return {(a, b) for a, b in zip(word, word[1:])}


class Encoder:
    """OpenAI's gpt-2/src/encoder.py, encode path only."""

    def __init__(self, encoder, bpe_merges):
        import regex
        self.encoder = encoder
        self.byte_encoder = bytes_to_unicode()
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}
        self.pat = regex.compile(PATTERN)

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def encode_ordinary(self, text):
        ids = []
        for token in self.pat.findall(text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(token).split(" "))
        return ids

    def encode(self, text, special):
        if not special:
            return self.encode_ordinary(text)
        ids = []
        parts = text.split("<|endoftext|>")
        for i, part in enumerate(parts):
            if i:
                ids.append(self.encoder["<|endoftext|>"])
            ids.extend(self.encode_ordinary(part))
        return ids


def make_encoder(tokenizer_dir):
    import regex  # noqa: F401  (fail early when python3-regex is missing)
    with open(os.path.join(tokenizer_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(tokenizer_dir, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")[1:-1]
    reference = Encoder(encoder, [tuple(line.split()) for line in lines])
    return reference.encode


def make_tiktoken(tokenizer_dir):
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(tokenizer_dir, "vocab.bpe"),
        encoder_json_file=os.path.join(tokenizer_dir, "encoder.json"))
    encoding = tiktoken.Encoding("gpt2_local", pat_str=PATTERN, mergeable_ranks=ranks,
                                 special_tokens={"<|endoftext|>": 50256})

    def encode(text, special):
        if special:
            return encoding.encode(text, allowed_special="all")
        return encoding.encode_ordinary(text)
    return encode


def make_tokenizers(tokenizer_dir):
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))

    def encode(text, special):
        if not special:
            raise RuntimeError("tokenizers always recognises added tokens")
        return tokenizer.encode(text, add_special_tokens=False).ids
    return encode


BACKENDS = {"tiktoken": make_tiktoken, "tokenizers": make_tokenizers, "encoder": make_encoder}


def make_backend(name, tokenizer_dir):
    if name != "auto":
        return name, BACKENDS[name](tokenizer_dir)
    for candidate in ("tiktoken", "encoder"):
        try:
            return candidate, BACKENDS[candidate](tokenizer_dir)
        except ImportError:
            continue
    raise ImportError("neither tiktoken nor the regex module is importable")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer_dir", required=True)
    parser.add_argument("--backend", default="auto", choices=["auto"] + list(BACKENDS))
    parser.add_argument("--special", action="store_true", help="recognise <|endoftext|>")
    parser.add_argument("--lines", action="store_true", help="one input per line of FILE")
    parser.add_argument("file")
    parser.add_argument("out")
    args = parser.parse_args()
    try:
        name, encode = make_backend(args.backend, args.tokenizer_dir)
    except ImportError as error:
        print(f"reference unavailable: {error}", file=sys.stderr)
        return 3
    with open(args.file, "rb") as f:
        data = f.read()
    inputs = data.split(b"\n") if args.lines else [data]
    with open(args.out, "w") as out:
        for item in inputs:
            text = item.decode("utf-8", errors="replace")
            out.write(" ".join(map(str, encode(text, args.special))) + "\n")
    print(f"reference backend: {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
