#!/usr/bin/env python3
"""Reference side of benchmarks/optim_bench: one AdamW step over a flat fp32 shard of N elements
with DeepSpeed's DeepSpeedCPUAdam (its cpu_adam op, JIT-built on first use) and with
torch.optim.AdamW (foreach, CPU), at a given thread count. Prints one line per optimizer:

  RESULT <name> <threads> <median wall seconds per step> <G elements/s> <median CPU seconds>

or `UNAVAILABLE <name> <reason>` when an optimizer cannot run. Steps are timed one by one after a
warm-up step (which allocates the moments); the medians of the wall time and of the process CPU
time (all threads) are reported.

DeepSpeed's CPU op builder leaves the C++ standard to torch's cpp_extension, which passes
-std=c++14 on torch < 2 (Debian's torch 1.13), while cpu_adam's headers need C++17
(std::is_same_v): the builder's flags get -std=c++17 appended here (the last -std wins). The
build needs torch's C++ headers (Debian: libtorch-dev) and pybind11 (pybind11-dev).
"""
import argparse
import os
import sys
import time


def median_step(step, repetitions):
    """Median wall seconds and median process CPU seconds of one step."""
    step()  # warm-up: state allocation, first-touch of the moments
    walls, cpus = [], []
    for _ in range(repetitions):
        wall, cpu = time.perf_counter(), time.process_time()
        step()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    walls.sort()
    cpus.sort()
    return walls[len(walls) // 2], cpus[len(cpus) // 2]


def report(name, threads, seconds, elements):
    wall, cpu = seconds
    print(f"RESULT {name} {threads} {wall:.6f} {elements / wall / 1e9:.4f} {cpu:.6f}", flush=True)


def deepspeed_adam(torch, elements, threads, repetitions):
    if int(torch.__version__.split(".")[0]) < 2:
        from deepspeed.ops.op_builder.cpu.builder import CPUOpBuilder
        cxx_args = CPUOpBuilder.cxx_args
        CPUOpBuilder.cxx_args = lambda self: cxx_args(self) + ["-std=c++17"]
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    param = torch.full((elements,), 0.5, dtype=torch.float32)
    param.grad = torch.full((elements,), 0.01, dtype=torch.float32)
    optimizer = DeepSpeedCPUAdam([param], lr=1e-3, weight_decay=0.01, adamw_mode=True)
    seconds = median_step(optimizer.step, repetitions)
    del optimizer, param
    return seconds


def torch_adamw(torch, elements, threads, repetitions, foreach):
    param = torch.full((elements,), 0.5, dtype=torch.float32, requires_grad=True)
    param.grad = torch.full((elements,), 0.01, dtype=torch.float32)
    optimizer = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.01, foreach=foreach)
    seconds = median_step(optimizer.step, repetitions)
    del optimizer, param
    return seconds


def build_failure(error):
    """One line: the exception, and the first compiler error in it or its cause (a failed JIT
    build carries the compiler's output, e.g. "fatal error: torch/extension.h: No such file")."""
    texts = [str(error)] + ([str(error.__cause__)] if error.__cause__ is not None else [])
    reason = f"{type(error).__name__}: " + " ".join(texts[0].split())[:200]
    for text in texts:
        for line in text.splitlines():
            if "error:" in line:
                return reason + " | " + line.strip()[:300]
    if len(texts) > 1:
        reason += " | " + " ".join(texts[1].split())[:300]
    return reason


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=100_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--skip_torch", action="store_true")
    args = parser.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}", flush=True)
    try:
        import deepspeed
        seconds = deepspeed_adam(torch, args.elements, args.threads, args.repetitions)
        report(f"DeepSpeedCPUAdam({deepspeed.__version__})", args.threads, seconds, args.elements)
    except Exception as error:  # the reason goes to the report, not a traceback
        print(f"UNAVAILABLE DeepSpeedCPUAdam {build_failure(error)}", flush=True)
    if not args.skip_torch:
        seconds = torch_adamw(torch, args.elements, args.threads, args.repetitions, foreach=True)
        report("torch.optim.AdamW(foreach)", args.threads, seconds, args.elements)
    return 0


if __name__ == "__main__":
    sys.exit(main())
