#!/usr/bin/env python3
"""DeepSpeed's own DynamicLossScaler (deepspeed.runtime.fp16.loss_scaler) as the oracle for zero's
LossScaler and the engine's fp16 overflow handling.

Usage: loss_scaler_reference.py IN.json OUT.json   (exits 77 when torch or deepspeed is missing:
the C++ test, tests/engine/loss_scaler_golden_test.cc, then skips).

IN.json: {"cases": [{"name", "initial_scale_power", "loss_scale_window", "hysteresis",
"consecutive_hysteresis", "min_loss_scale", "overflows": [bool, ...],
optionally "raise_error_at_min_scale"}]}, the fp16 section's
values and the overflow seen at each boundary. The scaler is built as DeepSpeed's fp16 optimizers
build it from the section (init_scale 2^initial_scale_power, delayed_shift = hysteresis) and
update_scale(overflow) runs once per boundary. OUT.json gets, per case, cur_scale and
cur_hysteresis after each update.
"""
import json
import logging
import sys

try:
    import torch
    import deepspeed
    from deepspeed.runtime.fp16 import loss_scaler
except Exception as error:  # noqa: BLE001
    print(f"torch/deepspeed unavailable: {error}", file=sys.stderr)
    sys.exit(77)

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
# update_scale logs on rank 0 through deepspeed.comm; no process group is needed for one process.
loss_scaler.dist.get_rank = lambda *args, **kwargs: 0


def run(case):
    scaler = loss_scaler.DynamicLossScaler(
        init_scale=2.0 ** case["initial_scale_power"],
        scale_window=case["loss_scale_window"],
        min_scale=case["min_loss_scale"],
        delayed_shift=case["hysteresis"],
        consecutive_hysteresis=case["consecutive_hysteresis"],
        raise_error_at_min_scale=case.get("raise_error_at_min_scale", True),
        dtype=torch.half)
    scales, hysteresis = [], []
    for overflow in case["overflows"]:
        scaler.update_scale(bool(overflow))
        scales.append(float(scaler.cur_scale))
        hysteresis.append(int(scaler.cur_hysteresis))
    return {"name": case["name"], "scales": scales, "hysteresis": hysteresis}


def main():
    with open(sys.argv[1]) as file:
        cases = json.load(file)["cases"]
    result = {"deepspeed": deepspeed.__version__, "torch": torch.__version__,
              "cases": [run(case) for case in cases]}
    with open(sys.argv[2], "w") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main()
