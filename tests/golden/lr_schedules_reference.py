#!/usr/bin/env python3
"""DeepSpeed's own LR schedules (deepspeed.runtime.lr_schedules) as the oracle for zero::optim.

Usage: lr_schedules_reference.py OUT.json   (exits 77 when torch or deepspeed is missing: the C++
test, tests/optim/lr_schedule_golden_test.cc, then skips).

Each case is a DeepSpeed "scheduler" section plus the optimizer's lr. The schedule is built the
way DeepSpeed's engine builds it (the class named by "type", constructed over a torch AdamW with
the section's params) and stepped as the engine steps it: the optimizer runs with the group's lr,
then lr_scheduler.step(). OUT.json gets, per case, the section, the lr and the optimizer's
(beta1, beta2) that optimizer step k+1 runs with, k = 0 .. steps - 1 (k = 0: before any
scheduler step), over at least twice each schedule's own length.
"""
import json
import logging
import sys

try:
    import torch
    from deepspeed.runtime import lr_schedules
except Exception as error:  # noqa: BLE001
    print(f"torch/deepspeed unavailable: {error}", file=sys.stderr)
    sys.exit(77)

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)


def case(name, kind, params, steps, lr=3e-3):
    return {"name": name, "lr": lr, "steps": steps, "scheduler": {"type": kind, "params": params}}


WARMUP = {"warmup_min_lr": 1e-4, "warmup_max_lr": 1e-2, "warmup_num_steps": 10}
CASES = [
    case("range_continuous", "LRRangeTest",
         {"lr_range_test_min_lr": 1e-3, "lr_range_test_step_size": 4,
          "lr_range_test_step_rate": 0.5}, 40),
    case("range_staircase", "LRRangeTest",
         {"lr_range_test_min_lr": 1e-3, "lr_range_test_step_size": 4,
          "lr_range_test_step_rate": 0.5, "lr_range_test_staircase": True}, 40),
    case("one_cycle_momentum_decay", "OneCycle",
         {"cycle_min_lr": 1e-3, "cycle_max_lr": 1e-2, "cycle_first_step_size": 5,
          "cycle_second_step_size": 7, "decay_lr_rate": 0.5, "decay_step_size": 3,
          "cycle_momentum": True, "cycle_min_mom": 0.85, "cycle_max_mom": 0.95,
          "decay_mom_rate": 0.1}, 30),
    case("one_cycle_defaults_no_momentum", "OneCycle",
         {"cycle_min_lr": 2e-3, "cycle_max_lr": 8e-3, "cycle_first_step_size": 6,
          "cycle_momentum": False}, 30),
    case("one_cycle_no_decay_momentum", "OneCycle",
         {"cycle_min_lr": 1e-3, "cycle_max_lr": 5e-3, "cycle_first_step_size": 4,
          "cycle_second_step_size": 4}, 20),
    case("one_cycle_stairs", "OneCycle",
         {"cycle_min_lr": 1e-3, "cycle_max_lr": 1e-2, "cycle_first_step_size": 8,
          "cycle_second_step_size": 6, "cycle_first_stair_count": 4,
          "cycle_second_stair_count": 3, "decay_lr_rate": 0.2, "decay_step_size": 2}, 30),
    case("one_cycle_stairs_second_default", "OneCycle",
         {"cycle_min_lr": 1e-3, "cycle_max_lr": 1e-2, "cycle_first_step_size": 6,
          "cycle_first_stair_count": 2}, 26),
    case("warmup_log", "WarmupLR", dict(WARMUP), 25),
    case("warmup_linear", "WarmupLR", dict(WARMUP, warmup_type="linear", warmup_min_lr=0.0), 25),
    case("warmup_one_step", "WarmupLR", dict(WARMUP, warmup_num_steps=1), 6),
    # warmup_max_lr absent: DeepSpeed's WarmupLR warms up to the optimizer's lr.
    case("warmup_to_optimizer_lr", "WarmupLR", {"warmup_num_steps": 8}, 20, lr=4e-3),
    case("warmup_decay_log", "WarmupDecayLR", dict(WARMUP, total_num_steps=30), 60),
    case("warmup_decay_linear", "WarmupDecayLR",
         dict(WARMUP, total_num_steps=30, warmup_type="linear"), 60),
    case("warmup_cosine_linear", "WarmupCosineLR",
         {"total_num_steps": 30, "warmup_num_steps": 10, "warmup_min_ratio": 0.1,
          "cos_min_ratio": 0.01, "warmup_type": "linear"}, 60),
    case("warmup_cosine_log_defaults", "WarmupCosineLR",
         {"total_num_steps": 24, "warmup_num_steps": 6}, 48),
    case("warmup_cosine_zero_floor", "WarmupCosineLR",
         {"total_num_steps": 20, "warmup_num_steps": 5, "cos_min_ratio": 0.0,
          "warmup_type": "linear"}, 40, lr=1e-2),
]


def run(entry):
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=entry["lr"], betas=(0.9, 0.999))
    section = entry["scheduler"]
    scheduler = getattr(lr_schedules, section["type"])(optimizer, **section["params"])
    lrs, betas = [], []
    for _ in range(entry["steps"]):
        group = optimizer.param_groups[0]
        lrs.append(float(group["lr"]))
        betas.append([float(b) for b in group["betas"]])
        scheduler.step()
    return dict(entry, lrs=lrs, betas=betas)


def main():
    import deepspeed
    with open(sys.argv[1], "w") as f:
        json.dump({"deepspeed": deepspeed.__version__, "torch": torch.__version__,
                   "cases": [run(entry) for entry in CASES]}, f)


if __name__ == "__main__":
    main()
