#!/usr/bin/env python3
"""Llama-family tokenizer.json files for run_clm's data path (tests/data/run_clm_test.cc), built
with the `tokenizers` library from CORPUS (nothing can be downloaded), by the builders of
llama_tokenizer_reference.py:
  llama3   byte-level BPE with Llama 3's Split pattern, template <|begin_of_text|> $A
  llama2   SentencePiece-style BPE with byte fallback, template <s> $A
  mistral  the same model with Metaspace, template <s> $A </s> (eos added to each text too)
into OUT/<name>/tokenizer.json. Exit 3 when `tokenizers` cannot be imported.
Usage: run_clm_tokenizers.py OUT CORPUS
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_tokenizer_reference as builders  # noqa: E402  (exits 3 without tokenizers)


def main():
    out, corpus_path = sys.argv[1:3]
    with open(corpus_path, "rb") as stream:
        corpus = stream.read().decode("utf-8", errors="replace").split("\n")
    llama3 = builders.train_byte_level(corpus, builders.LLAMA3_PATTERN, False)
    builders.set_template(llama3, "<|begin_of_text|> $A", byte_level=True)
    model = builders.sentencepiece_model(corpus, True)
    tokenizers = {
        "llama3": llama3,
        "llama2": builders.sentencepiece_tokenizer(model, None, "<s> $A"),
        "mistral": builders.sentencepiece_tokenizer(model, ("first", False), "<s> $A </s>"),
    }
    for name, tokenizer in tokenizers.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        tokenizer.save(os.path.join(out, name, "tokenizer.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
