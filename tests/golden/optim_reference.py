#!/usr/bin/env python3
"""Reference values for zero's optimizers and LR schedules: torch.optim (Adam, AdamW, SGD) on
fixed inputs, Lamb as DeepSpeed's FusedLamb computes it, and DeepSpeed's schedule formulas.

Usage: optim_reference.py OUT.json   (exits 77 when torch is missing, so the test skips)
Inputs are closed-form so the C++ test regenerates them: p0[i] = sin(0.37 i + 0.1),
grad_t[i] = 0.5 cos(0.11 i (t + 1)) + 0.01 t.
"""
import json
import math
import sys

try:
    import torch
except ImportError:
    sys.exit(77)

N = 37
STEPS = 3


def params0():
    return torch.tensor([math.sin(0.37 * i + 0.1) for i in range(N)], dtype=torch.float32)


def grad(t):
    return torch.tensor([0.5 * math.cos(0.11 * i * (t + 1)) + 0.01 * t for i in range(N)],
                        dtype=torch.float32)


def run_torch(make):
    p = torch.nn.Parameter(params0())
    opt = make([p])
    out = []
    for t in range(STEPS):
        p.grad = grad(t)
        opt.step()
        out.append(p.detach().tolist())
    return out


def run_lamb(lr, beta1, beta2, eps, wd, max_coeff, min_coeff):
    # DeepSpeed FusedLamb (eps outside the sqrt), one tensor.
    p = params0().double()
    m = torch.zeros(N, dtype=torch.float64)
    v = torch.zeros(N, dtype=torch.float64)
    out = []
    for t in range(STEPS):
        g = grad(t).double()
        step = t + 1
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        update = m / (v.sqrt() + eps) + wd * p
        step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        w_norm, u_norm = p.norm().item(), update.norm().item()
        coeff = 1.0
        if w_norm != 0 and u_norm != 0:
            coeff = min(max(w_norm / u_norm, min_coeff), max_coeff)
        p = p - step_size * coeff * update
        out.append(p.tolist())
    return out


# DeepSpeed's deepspeed/runtime/lr_schedules.py get_lr() at last_batch_iteration i.
def warmup_gamma(i, warmup, kind):
    warmup = max(2, warmup)
    if kind == "log":
        return math.log(i + 1) / math.log(warmup)
    return i / warmup


def warmup_lr(i, lo, hi, warmup, kind):
    gamma = warmup_gamma(i, warmup, kind) if i < max(2, warmup) else 1.0
    return lo + (hi - lo) * gamma


def warmup_decay_lr(i, total, lo, hi, warmup, kind):
    w = max(2, warmup)
    if i < w:
        gamma = warmup_gamma(i, warmup, kind)
    else:
        gamma = max(0.0, float(total - i) / float(max(1.0, total - w)))
    return lo + (hi - lo) * gamma


def warmup_cosine_lr(i, base, total, warmup, min_ratio, cos_min_ratio, kind):
    w = max(2, warmup)
    if i < w:
        ratio = min_ratio + (1 - min_ratio) * warmup_gamma(i, warmup, kind)
    else:
        real_last = i - w + 1
        real_total = total - w
        ratio = (1 + math.cos(math.pi * real_last / real_total)) / 2
        ratio = max(0.0, cos_min_ratio + (1 - cos_min_ratio) * ratio)
    return base * ratio


def one_cycle(i, lo, hi, first, second, decay_rate, decay_step, mom_lo, mom_hi, mom_rate):
    total = float(first + second)
    ratio = first / total
    if i < total:
        batch = i + 1
        cycle = math.floor(1 + batch / total)
        x = 1.0 + batch / total - cycle
        scale = x / ratio if x <= ratio else (x - 1) / (ratio - 1)
        return lo + (hi - lo) * scale, mom_hi - (mom_hi - mom_lo) * scale
    interval = (i - total + 1) / decay_step
    return lo / (1 + decay_rate * interval), mom_hi * (1 + mom_rate * interval)


def range_test(i, lo, step_size, rate, staircase):
    interval = i / step_size
    if staircase:
        interval = math.floor(interval)
    return lo * (1 + rate * interval)


def main():
    out = {
        "n": N,
        "steps": STEPS,
        "adamw": run_torch(lambda ps: torch.optim.AdamW(ps, lr=1e-2, betas=(0.9, 0.99), eps=1e-8,
                                                        weight_decay=0.1)),
        "adam_l2": run_torch(lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.8, 0.999), eps=1e-6,
                                                         weight_decay=0.05)),
        "sgd_momentum": run_torch(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                             dampening=0.1, weight_decay=0.01)),
        "sgd_nesterov": run_torch(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                             nesterov=True)),
        "lamb": run_lamb(1e-2, 0.9, 0.999, 1e-6, 0.01, 10.0, 0.01),
        "warmup_lr_log": [warmup_lr(i, 1e-4, 1e-2, 10, "log") for i in range(15)],
        "warmup_lr_linear": [warmup_lr(i, 0.0, 1e-2, 10, "linear") for i in range(15)],
        "warmup_decay_lr": [warmup_decay_lr(i, 30, 1e-4, 1e-2, 10, "log") for i in range(35)],
        "warmup_cosine_lr": [warmup_cosine_lr(i, 3e-3, 30, 10, 0.1, 0.01, "linear")
                             for i in range(35)],
        "one_cycle": [one_cycle(i, 1e-3, 1e-2, 5, 7, 0.5, 3, 0.8, 0.9, 0.1) for i in range(20)],
        "lr_range_test": [range_test(i, 1e-3, 4, 0.5, False) for i in range(10)],
        "lr_range_test_staircase": [range_test(i, 1e-3, 4, 0.5, True) for i in range(10)],
    }
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
