#!/usr/bin/env python3
"""DeepSpeed side of benchmarks/offload_bench.sh: GPT-2 step time under DeepSpeed ZeRO-3 with CPU
offload, on CPU with gloo. One process per rank, with the environment a torch launcher sets
(offload_bench.sh starts them so: Debian's `python -m torch.distributed.run` fails under Python
3.11):

  RANK=r LOCAL_RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 \
    python benchmarks/offload_bench_deepspeed.py --train_file F --tokenizer DIR \
      --n_layer 4 --n_embd 768 --n_head 12 --block_size 128 --batch 2 --warmup 2 --steps 5

Builds a Hugging Face GPT2LMHeadModel from scratch of the given shape (GPT-2 vocabulary, dropout
off, tied embeddings, fp32), reads the corpus with the GPT-2 tokenizer (tokenizer.json under
--tokenizer), cuts it into blocks of --block_size tokens, and trains with deepspeed.initialize on
a ZeRO-3 config with `offload_optimizer: cpu` (and `offload_param: cpu` with --offload_param),
AdamW (lr 5e-5, weight decay 0, as `zero train`'s defaults), gradient clipping 1. Each rank takes
its own --batch blocks per step (rank-strided, in order). A step is forward + backward +
engine.step(), timed on every rank after a barrier; the step's time is the slowest rank's.
Then rank 0 retrains the first --check_steps steps with plain torch (check_against_torch) and
fails unless its losses agree. Prints on rank 0, after --warmup untimed steps:

  RESULT deepspeed-<version> <label> <median s/step> <min s/step> <max s/step>
         <peak RSS MiB per rank> optimizer=<class> params=<count> fwd/bwd/step=<s/s/s>
         times=<s,s,...>

(fwd/bwd/step: rank 0's median seconds in engine(...), engine.backward, engine.step: with ZeRO-3
the backward includes the gradient reduce-scatter and the device->host copy of the gradients,
the step the CPU Adam and the parameter copies back.)

DeepSpeed picks DeepSpeedCPUAdam (its cpu_adam op, JIT-built on first use) for an offloaded
optimizer: the class it ran is printed. Its op builder leaves the C++ standard to torch, which
passes -std=c++14 on torch < 2 (Debian's torch 1.13) while cpu_adam's headers need C++17: the
builder's flags get -std=c++17 appended, as in optim_bench_deepspeed.py (the same flags, so the
op built there is reused from the torch extensions cache).
"""
import argparse
import os
import resource
import statistics
import sys
import time


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json")
    parser.add_argument("--n_layer", type=int, default=4)
    parser.add_argument("--n_embd", type=int, default=768)
    parser.add_argument("--n_head", type=int, default=12)
    parser.add_argument("--block_size", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2, help="blocks per rank per step")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--offload_param", action="store_true")
    parser.add_argument("--label", default=None)
    parser.add_argument("--check_steps", type=int, default=3,
                        help="rank 0 retrains the first N steps with plain torch (0: no check)")
    return parser.parse_args()


def ds_config(args, world):
    zero = {
        "stage": 3,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "offload_optimizer": {"device": "cpu", "pin_memory": True},
    }
    if args.offload_param:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {
        "train_batch_size": args.batch * world,
        "train_micro_batch_size_per_gpu": args.batch,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW",
                      "params": {"lr": 5e-5, "betas": [0.9, 0.999], "eps": 1e-8,
                                 "weight_decay": 0.0}},
        "fp16": {"enabled": False},
        "bf16": {"enabled": False},
        "zero_optimization": zero,
        "steps_per_print": 1000000,
        "wall_clock_breakdown": False,
    }


def shim_forward_pre_hook(torch):
    """torch < 2: Module.register_forward_pre_hook has no `prepend` and no `with_kwargs`, which
    DeepSpeed's engine passes for its own module-level hooks (its forward prologue: timers, flops
    profiler, fp16 input casting; ZeRO-3's parameter hooks are registered without them). torch
    1.13 does not pass keyword arguments to hooks: a with_kwargs hook gets an empty dict, what it
    returns for the positional inputs is kept and its kwargs part dropped. The prologue changes
    inputs only for fp16 autocast, which is off here."""
    original = torch.nn.Module.register_forward_pre_hook

    def register(self, hook, *, prepend=False, with_kwargs=False):
        if not with_kwargs:
            return original(self, hook)

        def positional(module, inputs):
            result = hook(module, inputs, {})
            return result[0] if isinstance(result, tuple) and len(result) == 2 else result

        return original(self, positional)

    torch.nn.Module.register_forward_pre_hook = register
    if not hasattr(torch, "compiler"):  # ZeRO-3's hooks are decorated with torch.compiler.disable
        import types
        torch.compiler = types.SimpleNamespace(
            disable=lambda fn=None, **kwargs: fn if fn is not None else (lambda f: f),
            is_compiling=lambda: False)
    if not hasattr(torch._C, "_current_graph_task_id"):
        # The id of the autograd graph task running on this thread, -1 outside backward: ZeRO-3
        # asks it in forward to tell activation-checkpoint recomputation (none here) apart.
        torch._C._current_graph_task_id = lambda: -1
    if not hasattr(torch, "get_autocast_dtype"):  # ZeRO-3's linear asks it (autocast is off)
        torch.get_autocast_dtype = lambda device: (
            torch.get_autocast_cpu_dtype() if device == "cpu" else torch.get_autocast_gpu_dtype())
    # On the CPU accelerator current_stream() is None; torch 2 takes record_stream(None) on a CPU
    # tensor as a no-op, torch 1.13 raises "unknown parameter type".
    record_stream = torch.Tensor.record_stream
    torch.Tensor.record_stream = lambda self, stream: (
        None if stream is None else record_stream(self, stream))
    # torch 2's autograd.Function style, which ZeRO-3's backward hooks use: forward(*args) without
    # ctx, then setup_context(ctx, inputs, output). On torch 1.13 the subclass gets the classic
    # forward(ctx, *args) doing both.
    function = torch.autograd.Function

    def init_subclass(cls, **kwargs):
        if "setup_context" in cls.__dict__:
            forward, setup = cls.__dict__["forward"].__func__, cls.__dict__["setup_context"].__func__

            def classic(ctx, *args):
                output = forward(*args)
                setup(ctx, args, output)
                return output

            cls.forward = staticmethod(classic)

    function.__init_subclass__ = classmethod(init_subclass)


def shim_gloo_tensor_collectives(torch):
    """torch 1.13's Gloo process group has neither _allgather_base (all_gather_into_tensor) nor
    reduce_scatter, which ZeRO-3 calls for every parameter gather and gradient reduction. Gloo on
    torch 2 runs them as an all-gather into a list and as an all-reduce followed by a copy of this
    rank's chunk; the same here, with the result complete when the call returns (a finished work
    object for async_op)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    class Done:
        def wait(self, *args, **kwargs):
            return True

        def is_completed(self):
            return True

    def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
        world = dist.get_world_size(group)
        chunks = list(output_tensor.view(world, -1).unbind(0))
        dist.all_gather(chunks, input_tensor.reshape(-1), group=group)
        return Done() if async_op else None

    def reduce_scatter_tensor(output_tensor, input_tensor, op=dist.ReduceOp.SUM, group=None,
                              async_op=False):
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        reduced = input_tensor.clone()
        dist.all_reduce(reduced, op=op, group=group)
        output_tensor.view(-1).copy_(reduced.view(world, -1)[rank])
        return Done() if async_op else None

    for module in (dist, c10d):
        module.all_gather_into_tensor = all_gather_into_tensor
        module._all_gather_base = all_gather_into_tensor
        module.reduce_scatter_tensor = reduce_scatter_tensor
        module._reduce_scatter_base = reduce_scatter_tensor


def shim_grad_hook(torch):
    """Below torch 2.1 DeepSpeed hooks each parameter's AccumulateGrad node (reached through
    param.expand_as(param)) without keeping the node alive; torch 1.13 holds that node only
    weakly, so it is freed, the next backward makes a new one without the hook, and ZeRO-3 never
    reduces or partitions those gradients (the loss hardly moves). The parameter keeps it here."""
    from deepspeed.runtime.zero import stage3

    def register_grad_hook(param, hook):
        grad_acc = param.expand_as(param).grad_fn.next_functions[0][0]
        handles = getattr(param, "_offload_bench_grad_accs", [])
        handles.append(grad_acc)
        param._offload_bench_grad_accs = handles
        return grad_acc.register_hook(hook)

    stage3.register_grad_hook = register_grad_hook
    # How many parameters the running backward reaches (when every hook has fired, ZeRO-3 runs
    # its epilogue). DeepSpeed walks the autograd graph with torch >= 2 internals; every
    # parameter of GPT2LMHeadModel with labels takes part in every backward, so all of them count.
    stage3.count_used_parameters_in_backward = lambda parameters: sum(
        1 for p in parameters if isinstance(p, torch.Tensor) and p.requires_grad)


def main():
    args = parse()
    import torch
    import torch.distributed as dist
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if int(torch.__version__.split(".")[0]) < 2:
        shim_forward_pre_hook(torch)  # before deepspeed's modules define their Functions
        shim_gloo_tensor_collectives(torch)
        from deepspeed.ops.op_builder.cpu.builder import CPUOpBuilder
        cxx_args = CPUOpBuilder.cxx_args
        CPUOpBuilder.cxx_args = lambda self: cxx_args(self) + ["-std=c++17"]
    import deepspeed
    import transformers
    if int(torch.__version__.split(".")[0]) < 2:
        shim_grad_hook(torch)
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=os.path.join(args.tokenizer, "tokenizer.json"))
    with open(args.train_file, encoding="utf-8") as f:
        ids = tokenizer(f.read())["input_ids"]
    T = args.block_size
    blocks = torch.tensor(ids[: len(ids) // T * T], dtype=torch.long).view(-1, T)
    needed = (args.warmup + args.steps) * args.batch * world
    if blocks.shape[0] < needed:
        sys.exit(f"{args.train_file}: {blocks.shape[0]} blocks of {T} tokens, {needed} needed")

    def initial_model():
        torch.manual_seed(42)
        config = transformers.GPT2Config(
            vocab_size=50257, n_positions=T, n_embd=args.n_embd, n_layer=args.n_layer,
            n_head=args.n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return transformers.GPT2LMHeadModel(config)

    def rank_batch(step, r):
        first = (step * world + r) * args.batch
        return blocks[first: first + args.batch]

    model = initial_model()
    parameters = sum(p.numel() for p in model.parameters())
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config(args, world))
    inner = getattr(optimizer, "optimizer", optimizer)
    optimizer_name = type(inner).__module__ + "." + type(inner).__name__

    times, losses, phases = [], [], []
    for step in range(args.warmup + args.steps):
        batch = rank_batch(step, rank)
        dist.barrier()
        start = time.perf_counter()
        loss = engine(input_ids=batch, labels=batch).loss
        forward = time.perf_counter()
        engine.backward(loss)
        backward = time.perf_counter()
        engine.step()
        if step >= args.warmup:
            phases.append((forward - start, backward - forward, time.perf_counter() - backward))
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"step {step + 1} loss {loss.item():.4f} grad_norm "
                  f"{engine.get_global_grad_norm():.3f} {elapsed.item():.3f} s"
                  f"{' (warm-up)' if step < args.warmup else ''}", flush=True)
        if step >= args.warmup:
            times.append(elapsed.item())
        losses.append(loss.item())
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    rss_all = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(rss_all, rss)
    if rank == 0:
        label = args.label or ("opt+param-cpu" if args.offload_param else "opt-cpu")
        print(f"RESULT deepspeed-{deepspeed.__version__} {label} {statistics.median(times):.3f} "
              f"{min(times):.3f} {max(times):.3f} "
              f"{'/'.join(f'{r.item():.0f}' for r in rss_all)} "
              f"optimizer={optimizer_name} params={parameters} "
              f"fwd/bwd/step={'/'.join(f'{statistics.median(p):.2f}' for p in zip(*phases))} "
              f"times={','.join(f'{t:.4f}' for t in times)}", flush=True)
    if rank == 0 and args.check_steps > 0:
        check_against_torch(torch, initial_model(), rank_batch, world, losses,
                            min(args.check_steps, len(losses)))
    dist.barrier()
    return 0


def check_against_torch(torch, model, rank_batch, world, losses, steps):
    """The first steps again in this process with torch.optim.AdamW on the same initial weights
    and the same per-rank batches (the gradient averaged over ranks, clipped to norm 1): rank 0's
    losses must agree, or the DeepSpeed run above did not train as ZeRO-3 should."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.0)
    reference = []
    for step in range(steps):
        optimizer.zero_grad()
        for r in range(world):
            batch = rank_batch(step, r)
            loss = model(input_ids=batch, labels=batch).loss
            (loss / world).backward()
            if r == 0:
                reference.append(loss.item())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    worst = max(abs(a - b) for a, b in zip(reference, losses))
    text = " ".join(f"{a:.4f}/{b:.4f}" for a, b in zip(losses, reference))
    print(f"CHECK deepspeed/torch losses of rank 0, steps 1-{steps}: {text} "
          f"(max difference {worst:.2e})", flush=True)
    if worst > 1e-3:
        sys.exit(f"the DeepSpeed losses differ from plain torch's by {worst:.2e}")


if __name__ == "__main__":
    sys.exit(main())
