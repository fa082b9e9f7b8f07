#!/usr/bin/env python3
"""PyTorch reference for benchmarks/gpt2_bench: one GPT-2 124M training step (forward, backward,
AdamW) at B x T on CPU, fp32 and bf16 autocast, printing the median and best step seconds.

Runs Hugging Face transformers' GPT2LMHeadModel with SDPA attention and fused AdamW where those
are importable; otherwise the op-by-op model of tests/golden/gpt2_reference.py (forward+backward
only). The first line says which ran.
"""
import argparse
import os
import sys
import time

import torch


def timed(step, steps):
    times = []
    for index in range(steps + 1):
        start = time.perf_counter()
        step()
        if index > 0:
            times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2], times[0], len(times)


def hf_bench(batch, seq, steps):
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_positions=1024, n_embd=768, n_layer=12, n_head=12, vocab_size=50257)
    try:
        model = GPT2LMHeadModel(config, attn_implementation="sdpa")
        attention = model.config._attn_implementation
    except (TypeError, ValueError):
        model = GPT2LMHeadModel(config)
        attention = getattr(model.config, "_attn_implementation", "eager")
    model.train()
    try:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        fused = "fused AdamW"
    except (TypeError, RuntimeError, ValueError):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        fused = "AdamW (fused unavailable)"
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (batch, seq), generator=generator)
    print(f"PyTorch reference: transformers {transformers.__version__} GPT2LMHeadModel, "
          f"attention {attention}, {fused}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")

    def step(dtype):
        def run():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                loss = model(tokens, labels=tokens).loss
            loss.backward()
            optimizer.step()
        return run

    for dtype in ("fp32", "bf16"):
        median, best, count = timed(step(dtype), steps)
        print(f"torch_step_seconds ({dtype}) median {median:.4f} best {best:.4f} of {count}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        import transformers  # noqa: F401
    except ImportError as error:
        print(f"PyTorch reference: transformers not importable ({error}); running the op-by-op "
              "model of tests/golden/gpt2_reference.py (forward+backward, no optimizer)")
        sys.stdout.flush()
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "golden"))
        import gpt2_reference
        gpt2_reference.bench(args.batch, args.seq, args.steps, args.threads)
        return
    hf_bench(args.batch, args.seq, args.steps)


if __name__ == "__main__":
    main()
