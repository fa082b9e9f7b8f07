#!/usr/bin/env python3
"""PyTorch's GPT-2 124M training step on one GPU: the peer zero's GPU numbers are compared with.

The model is llm.c's train_gpt2.py / nanoGPT (pre-norm blocks, tanh GELU, tied lm head, the
vocabulary padded to 50304 as llm.c's GPU trainer pads it), bf16 autocast over fp32 weights,
causal attention through scaled_dot_product_attention (flash), fused AdamW, TF32 matmuls allowed.
Random tokens (the data pipeline is not what is timed). For each mode (eager, compile:
torch.compile of the model) it prints one line per timed step and a result line:

  result mode=eager B=16 T=1024 step_ms=... tokens_per_s=... mfu=... peak_mib=... params=...

MFU counts 6·N + 12·L·C·T FLOPs per token (N: every parameter; the attention term as nanoGPT's
estimate_mfu) against the device's dense bf16 peak (H100/H200 SXM: 989 TFLOP/s; --peak_tflops
overrides). Peak memory is torch.cuda.max_memory_allocated over the mode's steps.
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, T, L, C, NH):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def peak_tflops(name, override):
    if override:
        return override
    if "H100" in name or "H200" in name or "GH200" in name:
        return 989.0
    if "A100" in name:
        return 312.0
    return float("nan")


def run_mode(mode, args, device_name):
    torch.manual_seed(0)
    V, L, C, NH = 50304, 12, 768, 12
    model = GPT(V, args.seq, L, C, NH).cuda()
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8,
                                  weight_decay=0.1, fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    x = torch.randint(0, 50257, (args.batch, args.seq), device="cuda")
    y = torch.randint(0, 50257, (args.batch, args.seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - start
    torch.cuda.reset_peak_memory_stats()
    times = []
    for index in range(args.steps):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        loss = step()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
        print(f"{mode} step {index + 1}/{args.steps}: {times[-1]:.2f} ms, loss {loss.item():.4f}")
    times.sort()
    median_ms = times[len(times) // 2]
    tokens = args.batch * args.seq
    flops_per_token = 6 * params + 12 * L * C * args.seq
    achieved = flops_per_token * tokens / (median_ms / 1e3) / 1e12
    mfu = achieved / peak_tflops(device_name, args.peak_tflops)
    peak_mib = torch.cuda.max_memory_allocated() / 2**20
    print(f"result mode={mode} B={args.batch} T={args.seq} step_ms={median_ms:.2f} "
          f"tokens_per_s={tokens / (median_ms / 1e3):.0f} tflops={achieved:.1f} mfu={mfu:.3f} "
          f"peak_mib={peak_mib:.0f} params={params} warmup_s={warmup_s:.1f}")
    del model, optimizer, step_model
    torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--modes", default="eager,compile")
    parser.add_argument("--peak_tflops", type=float, default=0.0)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    name = torch.cuda.get_device_name()
    print(f"device {name}, torch {torch.__version__}, cuda {torch.version.cuda}, "
          f"cudnn {torch.backends.cudnn.version()}")
    for mode in args.modes.split(","):
        if mode not in ("eager", "compile"):
            print(f"unknown mode '{mode}' (eager, compile)", file=sys.stderr)
            return 2
        run_mode(mode, args, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
