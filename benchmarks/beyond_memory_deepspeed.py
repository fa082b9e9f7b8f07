#!/usr/bin/env python3
"""DeepSpeed side of benchmarks/beyond_memory.sh: the same GPT-2 and ZeRO-3 config trained by
DeepSpeed on the CPU accelerator (DS_ACCELERATOR=cpu, gloo, one rank), then saved. Run by the
script with the environment a torch launcher sets (RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR
MASTER_PORT) in a venv with torch 2, deepspeed 0.19 and transformers:

  python benchmarks/beyond_memory_deepspeed.py --deepspeed ds.json --train_file F \
    --tokenizer DIR --overrides n_embd=768,n_layer=12,n_head=12,n_positions=1024 \
    --block_size 128 --batch 1 --steps 3 --output_dir OUT

ds.json is the config `zero train` ran ("auto" values filled in as transformers' Trainer fills
them: batch, accumulation 1, clipping 1, AdamW lr 5e-5 as `zero train`'s defaults). The model is
built under transformers' HfDeepSpeedConfig, so `deepspeed.zero.Init` partitions each layer as it
is made (no whole model on the rank), from scratch with the given shape (GPT-2 vocabulary, dropout
off). The corpus is cut into blocks of --block_size tokens with the GPT-2 tokenizer, taken in
order. A step is forward + backward + engine.step(), each timed. Then `engine.save_checkpoint`
(the ZeRO checkpoint: the rank's fp32 masters and Adam's moments) and
`engine.save_16bit_model` (the Hugging Face weights, gathered) are timed (--no_checkpoint: the
model only; checkpoint_s=nan). Prints:

  step N loss L S s
  DEEPSPEED deepspeed-<version> s/step=<s,s,...> rss_train_gb=<peak after training>
            checkpoint_s=<s> model16_s=<s> rss_gb=<peak at the end> params=<count>
"""
import argparse
import os
import sys
import time

from deepspeed_side import filled_config, peak_rss_gb, report, token_blocks


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deepspeed", required=True, help="the ZeRO-3 config zero ran")
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json")
    parser.add_argument("--overrides", required=True, help="n_embd=..,n_layer=..,n_head=..")
    parser.add_argument("--block_size", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--no_checkpoint", action="store_true",
                        help="skip save_checkpoint (a disk without room for it)")
    return parser.parse_args()


def main():
    args = parse()
    import torch
    import torch.distributed as dist
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    import deepspeed
    import transformers
    from transformers.integrations import HfDeepSpeedConfig
    deepspeed.init_distributed(dist_backend="gloo")

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=os.path.join(args.tokenizer, "tokenizer.json"))
    with open(args.train_file, encoding="utf-8") as f:
        ids = tokenizer(f.read())["input_ids"]
    blocks = token_blocks(torch, ids, args.block_size, args.steps * args.batch, args.train_file)

    config = filled_config(args.deepspeed, args.batch)
    # else save_16bit_model saves nothing
    config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = True
    keep = HfDeepSpeedConfig(config)  # noqa: F841 (alive while the model is made: zero.Init)
    shape = {k: int(v) for k, v in (kv.split("=") for kv in args.overrides.split(","))}
    torch.manual_seed(42)
    model_config = transformers.GPT2Config(vocab_size=50257, resid_pdrop=0.0, embd_pdrop=0.0,
                                           attn_pdrop=0.0, **shape)
    model = transformers.GPT2LMHeadModel(model_config)
    parameters = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config)
    times = []
    for step in range(args.steps):
        batch = blocks[step * args.batch: (step + 1) * args.batch]
        start = time.perf_counter()
        loss = engine(input_ids=batch, labels=batch).loss
        engine.backward(loss)
        engine.step()
        times.append(time.perf_counter() - start)
        print(f"step {step + 1} loss {loss.item():.4f} {times[-1]:.2f} s", flush=True)
    rss_train = peak_rss_gb()
    checkpoint_s = float("nan")
    if not args.no_checkpoint:
        start = time.perf_counter()
        engine.save_checkpoint(os.path.join(args.output_dir, "checkpoint"))
        checkpoint_s = time.perf_counter() - start
    start = time.perf_counter()
    if not engine.save_16bit_model(os.path.join(args.output_dir, "model")):
        sys.exit("save_16bit_model saved nothing")
    model16_s = time.perf_counter() - start
    report(deepspeed, optimizer, parameters, times,
           {"rss_train_gb": f"{rss_train:.2f}", "checkpoint_s": f"{checkpoint_s:.2f}",
            "model16_s": f"{model16_s:.2f}", "rss_gb": f"{peak_rss_gb():.2f}"})
    dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
