#!/usr/bin/env python3
"""DeepSpeed side of benchmarks/big_models.sh: the same Llama shape, tokens and ds_config that
`zero train` ran, trained by DeepSpeed on one rank (the GPU, or DeepSpeed's CPU accelerator with
gloo under DS_ACCELERATOR=cpu). Run by the script with the environment a torch launcher sets
(RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR MASTER_PORT):

  python benchmarks/big_models_deepspeed.py --deepspeed ds.json --config DIR --ids FILE \
    --block_size 4096 --batch 1 --accumulation 8 --steps 4 --lr 3e-4 --warmup 2 \
    [--gradient_checkpointing]

The model is transformers' LlamaForCausalLM from DIR/config.json with random weights, made in
bf16 on the device (under HfDeepSpeedConfig at stage 3, so deepspeed.zero.Init partitions each
layer as it is made), SDPA attention, no dropout. The tokens are FILE's ids (whitespace-separated:
what `zero tokenizer encode` printed for the text zero trained on), cut into blocks of
--block_size in order. ds.json is zero's config with Trainer's "auto" values filled (AdamW with
betas 0.9/0.999, eps 1e-8, --lr, --weight_decay; clipping 1; WarmupDecayLR with --warmup linear
steps over --steps, `zero train`'s linear schedule one step later: DeepSpeed's first step runs at
its warmup_min_lr, 0). Blocks are taken in order, zero's sampler shuffles them: the same tokens,
another order. An optimizer step is --accumulation
micro-batches (engine forward, backward and step each), timed with the device synchronised.
Prints, per optimizer step and last:

  step N loss L S s T tokens/s
  DEEPSPEED deepspeed-<version> s/step=<s,...> torch=<version> tokens_per_s=<median after
            step 1> losses=<first step's>,<last step's> device_peak_mib=<allocated>
            device_reserved_mib=<reserved> host_peak_gb=<VmHWM> params=<count> optimizer=<class>
"""
import argparse
import os
import statistics
import sys
import time

from deepspeed_side import filled_config, peak_rss_gb, report, token_blocks


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deepspeed", required=True, help="the ds_config zero ran")
    parser.add_argument("--config", required=True, help="folder with the model's config.json")
    parser.add_argument("--ids", required=True, help="the token ids zero trained on")
    parser.add_argument("--block_size", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=1, help="micro-batch (blocks)")
    parser.add_argument("--accumulation", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--gradient_checkpointing", action="store_true")
    return parser.parse_args()


def make_model(torch, transformers, config_dir, device, stage3):
    """LlamaForCausalLM from config_dir, random weights, bf16, made on device (partitioned as it
    is made at stage 3: zero.Init through HfDeepSpeedConfig, alive in the caller)."""
    config = transformers.AutoConfig.from_pretrained(config_dir)
    config.use_cache = False
    config.attention_dropout = 0.0
    config._attn_implementation = "sdpa"
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        if stage3:
            return transformers.LlamaForCausalLM(config)
        with torch.device(device):
            return transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)


def main():
    args = parse()
    import torch
    import torch.distributed as dist
    import deepspeed
    import transformers
    from transformers.integrations import HfDeepSpeedConfig
    on_cpu = os.environ.get("DS_ACCELERATOR") == "cpu"
    if on_cpu:
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    deepspeed.init_distributed(dist_backend="gloo" if on_cpu else "nccl")
    device = torch.device("cpu" if on_cpu else "cuda")

    with open(args.ids, encoding="utf-8") as f:
        ids = [int(token) for token in f.read().split()]
    needed = args.steps * args.accumulation * args.batch
    blocks = token_blocks(torch, ids, args.block_size, needed, args.ids)

    config = filled_config(args.deepspeed, args.batch, args.accumulation, 1.0, args.lr,
                           args.weight_decay, breakdown=True)
    config.setdefault("scheduler", {"type": "WarmupDecayLR", "params": {
        "warmup_min_lr": 0.0, "warmup_max_lr": args.lr, "warmup_num_steps": args.warmup,
        "total_num_steps": args.steps, "warmup_type": "linear"}})
    stage3 = config["zero_optimization"].get("stage", 0) == 3
    keep = HfDeepSpeedConfig(config) if stage3 else None  # noqa: F841 (zero.Init while made)
    torch.manual_seed(42)
    model = make_model(torch, transformers, args.config, device, stage3)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    parameters = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                   config=config)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    tokens = args.batch * args.accumulation * args.block_size
    times, losses = [], []
    micro = 0
    for step in range(args.steps):
        synchronize()
        start = time.perf_counter()
        total = 0.0
        for _ in range(args.accumulation):
            batch = blocks[micro * args.batch: (micro + 1) * args.batch].to(device)
            micro += 1
            loss = engine(input_ids=batch, labels=batch).loss
            engine.backward(loss)
            engine.step()
            total += loss.item()
        synchronize()
        times.append(time.perf_counter() - start)
        losses.append(total / args.accumulation)
        print(f"step {step + 1} loss {losses[-1]:.4f} {times[-1]:.2f} s "
              f"{tokens / times[-1]:.0f} tokens/s", flush=True)
    later = times[1:] if len(times) > 1 else times
    peak = reserved = 0.0
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
        reserved = torch.cuda.max_memory_reserved() / 2**20
    report(deepspeed, optimizer, parameters, times,
           {"torch": torch.__version__, "tokens_per_s": f"{tokens / statistics.median(later):.0f}",
            "losses": f"{losses[0]:.4f},{losses[-1]:.4f}", "device_peak_mib": f"{peak:.0f}",
            "device_reserved_mib": f"{reserved:.0f}", "host_peak_gb": f"{peak_rss_gb():.2f}"})
    dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
