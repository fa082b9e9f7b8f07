"""What the DeepSpeed sides of zero's benchmarks share (beyond_memory_deepspeed.py,
big_models_deepspeed.py): the ds_config `zero train` ran with Trainer's "auto" values filled in,
the token blocks, the process's resident peak. Imported from the scripts beside it."""
import json
import resource
import sys


def filled_config(path, batch, accumulation=1, clipping=1.0, lr=5e-5, weight_decay=0.0,
                  breakdown=False):
    """The config at path with the "auto" values transformers' Trainer fills (one rank): the
    micro-batch, the accumulation, clipping, and AdamW (lr, betas 0.9/0.999, eps 1e-8,
    weight_decay: `zero train`'s defaults) unless the file names an optimizer."""
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config.update({"train_batch_size": batch * accumulation,
                   "train_micro_batch_size_per_gpu": batch,
                   "gradient_accumulation_steps": accumulation, "gradient_clipping": clipping,
                   "steps_per_print": 1_000_000, "wall_clock_breakdown": breakdown})
    config.setdefault("optimizer", {"type": "AdamW", "params": {
        "lr": lr, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": weight_decay}})
    for section in ("bf16", "fp16"):
        if config.get(section, {}).get("enabled") == "auto":
            config[section]["enabled"] = section == "bf16"
    zero = config["zero_optimization"]
    for key, value in list(zero.items()):
        if value == "auto":
            del zero[key]
    return config


def token_blocks(torch, ids, block_size, needed, source):
    """ids cut into rows of block_size tokens, in order (the tail dropped, as run_clm's
    group_texts); exits naming source when fewer than needed rows result."""
    rows = len(ids) // block_size
    if rows < needed:
        sys.exit(f"{source}: {rows} blocks of {block_size} tokens, {needed} needed")
    return torch.tensor(ids[: rows * block_size], dtype=torch.long).view(rows, block_size)


def peak_rss_gb():
    """The process's resident peak so far (VmHWM), GB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def report(deepspeed, optimizer, parameters, times, fields):
    """Prints the line the shell scripts read: `DEEPSPEED deepspeed-<version> s/step=<s,...>`,
    then fields (name: text, in order) as name=text, the parameter count and the optimizer class
    DeepSpeed ran (DeepSpeedCPUAdam when it offloads)."""
    inner = getattr(optimizer, "optimizer", optimizer)
    named = " ".join(f"{name}={text}" for name, text in fields.items())
    print(f"DEEPSPEED deepspeed-{deepspeed.__version__} "
          f"s/step={','.join(f'{t:.2f}' for t in times)} {named} "
          f"params={parameters} optimizer={type(inner).__name__}", flush=True)
