#!/usr/bin/env python3
"""Reference values for zero's optimizers: torch.optim (Adam, AdamW, SGD) on fixed inputs and Lamb
as DeepSpeed's FusedLamb computes it. (The LR schedules are checked against DeepSpeed's own code:
lr_schedules_reference.py.)

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
    }
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
