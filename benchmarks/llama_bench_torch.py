#!/usr/bin/env python3
"""PyTorch peer of benchmarks/llama_bench: one full training step (forward, backward, AdamW update)
of transformers' LlamaForCausalLM built from a config.json, on CPU, fp32 and bf16.

- attention: attn_implementation="sdpa" (the first line says what transformers set);
- optimizer: torch.optim.AdamW(fused=True) where this torch supports it on CPU, else foreach (said);
- fp32: fp32 parameters, gradients and optimizer;
- bf16: torch.autocast("cpu", bfloat16) over fp32 parameters: the fp32 parameters are the master
  weights AdamW updates, every matmul runs on bf16 copies of its operands, gradients are fp32
  (DeepSpeed's bf16 with fp32 masters, the engine's update included).
Prints one line per measured step: `torch_step <dtype> <wall s> cpu <process CPU s> loss <value>`.
"""
import argparse
import time

import torch


def build(config_json, dtype_note):
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig.from_json_file(config_json)
    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(config, attn_implementation="sdpa")
    model.train()
    try:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
        kind = "fused AdamW"
    except (RuntimeError, TypeError, ValueError) as error:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01,
                                      foreach=True)
        kind = f"foreach AdamW (fused refused: {error})"
    count = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}, transformers {transformers.__version__}: LlamaForCausalLM "
          f"{count} parameters, attention {model.config._attn_implementation}, {kind}, "
          f"{torch.get_num_threads()} threads, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}; {dtype_note}", flush=True)
    return config, model, optimizer


def kernels_note():
    """The BLAS of this torch build, from its own build description."""
    lines = [line.strip() for line in torch.__config__.show().splitlines()]
    keep = [line.lstrip("- ") for line in lines
            if line.startswith("- Intel(R) oneAPI Math Kernel") or line.startswith("- Intel(R) MKL-DNN")]
    return "; ".join(keep)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="config.json of a Llama model")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2, help="measured steps per dtype")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured steps per dtype")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--dtypes", default="fp32,bf16")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config, model, optimizer = build(
        args.config, "bf16 = autocast over fp32 parameters (fp32 masters, fp32 grads)")
    print(f"torch kernels: {kernels_note()}", flush=True)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq + 1), generator=generator)
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step(dtype):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(input_ids=inputs, use_cache=False).logits
        # The mean next-token cross-entropy in fp32, as zero computes it (labels are already
        # shifted, so the model's own loss, which shifts again, is not used).
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)),
                                                 labels.view(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    for dtype in args.dtypes.split(","):
        for index in range(args.warmup + args.steps):
            start, cpu = time.perf_counter(), time.process_time()
            loss = step(dtype)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            if index >= args.warmup:
                print(f"torch_step {dtype} {seconds:.4f} cpu {cpu:.3f} loss {loss:.4f}",
                      flush=True)


if __name__ == "__main__":
    main()
