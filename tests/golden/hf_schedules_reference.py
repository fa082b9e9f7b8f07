#!/usr/bin/env python3
"""Hugging Face's own LR schedules (transformers.get_scheduler) as the oracle for `zero train`'s
schedules without a DeepSpeed "scheduler" section (train/src/config/hf_schedule.cc).

Usage: hf_schedules_reference.py OUT.json   (exits 77 when torch or transformers is missing: the
C++ test, tests/train/hf_schedule_golden_test.cc, then skips).

Each case is (type, lr, warmup, total, steps): get_scheduler(type, optimizer, warmup, total) over a
torch SGD with that lr, stepped as the Trainer steps it (optimizer.step, then scheduler.step).
OUT.json gets, per case, the lr optimizer step k + 1 runs with, k = 0 .. steps - 1.
"""
import json
import sys
import warnings

try:
    import torch
    from transformers import get_scheduler
except Exception as error:  # noqa: BLE001
    print(f"torch/transformers unavailable: {error}", file=sys.stderr)
    sys.exit(77)

warnings.filterwarnings("ignore")

CASES = []
for kind in ["linear", "cosine", "cosine_with_restarts", "polynomial", "constant",
             "constant_with_warmup", "inverse_sqrt"]:
    for lr, warmup, total in [(5e-4, 0, 20), (3e-3, 4, 25), (1e-2, 7, 7), (2e-5, 1, 3)]:
        if kind == "polynomial" and warmup == total:
            continue  # transformers divides by zero (num_training_steps - num_warmup_steps)
        CASES.append({"type": kind, "lr": lr, "warmup": warmup, "total": total,
                      "steps": 2 * total + 3})


def run(case):
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=case["lr"])
    scheduler = get_scheduler(case["type"], optimizer, num_warmup_steps=case["warmup"],
                              num_training_steps=case["total"])
    lrs = []
    for _ in range(case["steps"]):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return dict(case, lrs=lrs)


with open(sys.argv[1], "w") as out:
    json.dump([run(case) for case in CASES], out)
