#!/usr/bin/env python3
"""Single-thread encode throughput of tiktoken and Hugging Face tokenizers on one file (MB/s),
beside benchmarks/tokenizer_bench. Needs pip's tiktoken / tokenizers; skips what is missing.
Usage: tokenizer_reference_bench.py GPT2_DIR FILE"""
import os
import sys
import time

import gpt2_tokenizer_reference


def measure(name, encode, text, repeats=10):
    encode(text)  # warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        ids = encode(text)
        best = min(best, time.perf_counter() - start)
    size = len(text.encode("utf-8"))
    print(f"{name:12s} {size / best / 1e6:8.2f} MB/s  ({best * 1e3:.1f} ms, {len(ids)} tokens)")


def main():
    tokenizer_dir, path = sys.argv[1], sys.argv[2]
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        import tiktoken  # noqa: F401
        encode = gpt2_tokenizer_reference.make_tiktoken(tokenizer_dir)
        measure("tiktoken", lambda t: encode(t, False), text)
    except ImportError:
        print("tiktoken: not installed")
    try:
        import tokenizers  # noqa: F401
        encode = gpt2_tokenizer_reference.make_tokenizers(tokenizer_dir)
        measure("tokenizers", lambda t: encode(t, True), text)
    except ImportError:
        print("tokenizers: not installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
