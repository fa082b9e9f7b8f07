#!/usr/bin/env python3
"""An independent training reference for zero's engine: plain PyTorch (float64) training of the
tiny GPT-2 from a Hugging Face checkpoint, with DeepSpeed's semantics and DeepSpeed's own LR
schedule class. Used by tests/engine/gpt2_trajectory_golden_test.cc.

Usage: gpt2_training_reference.py IN.json OUT_DIR   (exit 77 without torch or deepspeed)

IN.json: {"model_dir": folder with config.json + model.safetensors (the initial weights),
          "runs": [{"name", "steps", "accumulation", "gradient_clipping" (0: off),
                    "loss_scale" (static; 1: none),
                    "optimizer": {"type": "AdamW" | "SGD", "lr", "betas", "eps", "weight_decay"},
                    "scheduler": a DeepSpeed "scheduler" section or null,
                    "batches": [step][micro] -> {"tokens": [[...]], "targets": [[...]]}}]}
Per optimizer step, as DeepSpeed's engine does it: each micro-step's loss is scaled by
loss_scale / accumulation and back-propagated (gradients add up); at the boundary the gradients
are unscaled (÷ loss_scale), the global norm is taken (before clipping), clipped with
torch.nn.utils.clip_grad_norm_ (coefficient max_norm / (norm + 1e-6), as DeepSpeed), the torch
optimizer steps with the group's lr, then the scheduler (deepspeed.runtime.lr_schedules) steps.
OUT_DIR/result.json: per run the mean micro-step loss, the gradient norm and the lr of every step;
OUT_DIR/<name>/ the final weights as an HF checkpoint (config.json + model.safetensors, fp32).
The model is gpt2_reference.py's torch forward (no zero code); math in float64 from fp32 weights.
"""
import json
import logging
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    from deepspeed.runtime import lr_schedules
except Exception as error:  # noqa: BLE001
    print(f"torch/deepspeed unavailable: {error}", file=sys.stderr)
    sys.exit(77)
import gpt2_reference as ref  # noqa: E402

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)


def make_optimizer(spec, params):
    if spec["type"] == "AdamW":
        return torch.optim.AdamW(params, lr=spec["lr"], betas=tuple(spec["betas"]), eps=spec["eps"],
                                 weight_decay=spec["weight_decay"])
    if spec["type"] == "SGD":
        return torch.optim.SGD(params, lr=spec["lr"], momentum=0.0,
                               weight_decay=spec["weight_decay"])
    raise ValueError(f"unknown optimizer {spec['type']}")


def train(run, config, params32):
    names = list(params32)
    params = {name: params32[name].double().requires_grad_(True) for name in names}
    tensors = [params[name] for name in names]
    optimizer = make_optimizer(run["optimizer"], tensors)
    scheduler = None
    if run["scheduler"]:
        section = run["scheduler"]
        scheduler = getattr(lr_schedules, section["type"])(optimizer, **section["params"])
    scale, accumulation = float(run["loss_scale"]), run["accumulation"]
    losses, norms, lrs = [], [], []
    for step in range(run["steps"]):
        micro_batches = run["batches"][step]
        assert len(micro_batches) == accumulation
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for micro in micro_batches:
            tokens = torch.tensor(micro["tokens"], dtype=torch.int64)
            targets = torch.tensor(micro["targets"], dtype=torch.int64)
            loss = ref.loss_of(ref.forward(params, config, tokens), targets)
            (loss * scale / accumulation).backward()
            total += loss.item()
        for tensor in tensors:
            tensor.grad /= scale
        if run["gradient_clipping"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(tensors, run["gradient_clipping"]).item()
        else:
            norm = torch.sqrt(sum((t.grad * t.grad).sum() for t in tensors)).item()
        lrs.append(float(optimizer.param_groups[0]["lr"]))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(total / accumulation)
        norms.append(norm)
    return losses, norms, lrs, {name: params[name].detach().float() for name in names}


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    out = sys.argv[2]
    torch.set_num_threads(1)
    config, params32 = ref.load_checkpoint(spec["model_dir"])
    params32 = {(n if n.startswith("transformer.") else "transformer." + n): t.float()
                for n, t in params32.items() if not n.endswith((".attn.bias", ".masked_bias"))}
    params32.pop("lm_head.weight", None)
    results = {}
    for run in spec["runs"]:
        losses, norms, lrs, final = train(run, config, params32)
        folder = os.path.join(out, run["name"])
        os.makedirs(folder, exist_ok=True)
        shutil.copy(os.path.join(spec["model_dir"], "config.json"), folder)
        ref.write_safetensors(os.path.join(folder, "model.safetensors"), final, {"format": "pt"})
        results[run["name"]] = {"losses": losses, "grad_norms": norms, "lrs": lrs}
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
