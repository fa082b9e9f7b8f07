#!/usr/bin/env python3
"""zero.Tokenizer.encode_batch against tiktoken's encode_ordinary_batch and Hugging Face
tokenizers' encode_batch, in the same process, at the same thread counts, on the lines of tiny
shakespeare (every line, empty ones included), after checking that all three give identical ids;
then the cost of a 1-token zero.Tokenizer.encode against the C++ call
(benchmarks/tokenizer_bench --benchmark_filter=EncodeOneToken).

Each thread count runs in its own child process: Hugging Face tokenizers sizes its (rayon) pool
once per process, from RAYON_NUM_THREADS. Figures are the best of --repeats after a warm-up pass
(every tokenizer's caches warm, as in benchmarks/tokenizer_bench). What each call returns is what
its API returns: zero a TokenBatch (one int32 buffer + offsets), tiktoken lists of ints, tokenizers
Encoding objects.

Needs tiktoken and tokenizers (a private venv with `zero` importable, e.g. PYTHONPATH=
build/bindings/python) and the GPT-2 BPE files in ../shared/data (or $ZERO_SHARED_DATA).
Usage: tokenizer_binding_bench.py [--threads 1,2] [--repeats 10] [--cpp build/benchmarks/tokenizer_bench]
On a machine other jobs load, thread scaling needs the cores: run it under `chrt -f 1` (real-time
priority for its few seconds; the zero-only form, --time zero, is the shortest) and compare the
CPU ms column with the wall-clock one (equal at 1 thread when the process had its core).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[1]
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def data_dir():
    return pathlib.Path(os.environ.get("ZERO_SHARED_DATA", SOURCE_DIR.parent / "shared" / "data"))


def best_seconds(call, repeats):
    """(best wall-clock seconds, the process CPU seconds of that call)."""
    call()  # warm-up
    best = (float("inf"), 0.0)
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        call()
        best = min(best, (time.perf_counter() - start, time.process_time() - cpu))
    return best


def child(threads, repeats, timed_names):
    """One thread count: the three tokenizers timed in this process; prints one JSON line."""
    import numpy as np
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tokenizers import Tokenizer as HfTokenizer

    import zero

    gpt2 = data_dir() / "gpt2"
    lines = (data_dir() / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8").split("\n")
    ours = zero.Tokenizer.from_pretrained(str(gpt2))
    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=str(gpt2 / "vocab.bpe"),
                                            encoder_json_file=str(gpt2 / "encoder.json"))
    tik = tiktoken.Encoding("gpt2_local", pat_str=PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    hf = HfTokenizer.from_file(str(gpt2 / "tokenizer.json"))

    runs = {
        "zero": lambda: ours.encode_batch(lines, num_threads=threads),
        "tiktoken": lambda: tik.encode_ordinary_batch(lines, num_threads=threads),
        "tokenizers": lambda: hf.encode_batch(lines, add_special_tokens=False),
    }
    batch = runs["zero"]()
    reference = np.concatenate([np.asarray(ids, dtype=np.int32) for ids in runs["tiktoken"]()])
    hf_ids = np.concatenate([np.asarray(e.ids, dtype=np.int32) for e in runs["tokenizers"]()])
    identical = bool(np.array_equal(batch.ids, reference) and np.array_equal(batch.ids, hf_ids))
    per_line = all(batch[i].tolist() == ids for i, ids in
                   enumerate(runs["tiktoken"]()))
    size = sum(len(line.encode("utf-8")) for line in lines)
    timed = {name: best_seconds(run, repeats) for name, run in runs.items()
             if name in timed_names}
    print(json.dumps({"threads": threads, "lines": len(lines), "bytes": size,
                      "tokens": int(len(batch.ids)), "identical": identical and per_line,
                      "seconds": {name: wall for name, (wall, _) in timed.items()},
                      "cpu_seconds": {name: cpu for name, (_, cpu) in timed.items()}}))


def one_token_overhead(cpp, repeats):
    import timeit

    import zero
    tokenizer = zero.Tokenizer.from_pretrained(str(data_dir() / "gpt2"))
    assert tokenizer.encode("hello").tolist() == [31373]
    number = 200000
    python_ns = min(timeit.repeat(lambda: tokenizer.encode("hello"), number=number,
                                  repeat=repeats)) / number * 1e9
    cpp_ns = None
    if cpp and pathlib.Path(cpp).exists():
        out = subprocess.run([cpp, "--benchmark_filter=EncodeOneToken", "--benchmark_format=json",
                              f"--benchmark_repetitions={repeats}"],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "ZERO_SHARED_DATA": str(data_dir())}).stdout
        times = [b["real_time"] for b in json.loads(out)["benchmarks"]
                 if b.get("run_type") == "iteration"]
        cpp_ns = min(times)
    return python_ns, cpp_ns


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cpp", default=str(SOURCE_DIR / "build" / "benchmarks" /
                                             "tokenizer_bench"))
    parser.add_argument("--time", default="zero,tiktoken,tokenizers",
                        help="the tokenizers to time (the ids of all three are compared)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeats, args.time.split(","))
        return
    if not (data_dir() / "gpt2").exists():
        print(f"skipped: the GPT-2 BPE files are not in {data_dir()}")
        return
    results = []
    for threads in [int(t) for t in args.threads.split(",")]:
        env = {**os.environ, "RAYON_NUM_THREADS": str(threads),
               "TOKENIZERS_PARALLELISM": "true" if threads > 1 else "false"}
        out = subprocess.run([sys.executable, __file__, "--child", str(threads),
                              "--repeats", str(args.repeats), "--time", args.time],
                             capture_output=True, text=True, check=True, env=env).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    first = results[0]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (thread scaling needs "
          f"idle cores)")
    print(f"tiny shakespeare: {first['lines']} lines, {first['bytes'] / 1e6:.2f} MB, "
          f"{first['tokens']} tokens; best of {args.repeats}")
    print(f"{'threads':>7} {'tokenizer':<11} {'ms':>8} {'CPU ms':>8} {'MB/s':>8} "
          f"{'vs tiktoken':>11} ids")
    for result in results:
        for name, seconds in result["seconds"].items():
            versus = result["seconds"].get("tiktoken")
            print(f"{result['threads']:>7} {name:<11} {seconds * 1e3:8.1f} "
                  f"{result['cpu_seconds'][name] * 1e3:8.1f} "
                  f"{result['bytes'] / seconds / 1e6:8.1f} "
                  f"{versus / seconds if versus else float('nan'):10.2f}x "
                  f"{'identical' if result['identical'] else 'DIFFER'}")
    for result in results[1:]:
        print(f"zero scaling {first['threads']} -> {result['threads']} threads: "
              f"{first['seconds']['zero'] / result['seconds']['zero']:.2f}x")
    python_ns, cpp_ns = one_token_overhead(args.cpp, args.repeats)
    line = f"1-token encode: zero.Tokenizer.encode {python_ns:.0f} ns"
    if cpp_ns is not None:
        line += f", C++ Tokenizer::encode {cpp_ns:.0f} ns: +{python_ns - cpp_ns:.0f} ns"
    print(line)
    if not all(result["identical"] for result in results):
        sys.exit("tokenizer_binding_bench: the tokenizers' ids differ")


if __name__ == "__main__":
    main()
