#!/usr/bin/env python3
"""PyTorch reference for zero's GPT-2 (Hugging Face GPT2LMHeadModel semantics, plain torch).

Modes:
  reference --out DIR     tiny random GPT-2 -> DIR/model/{config.json, model.safetensors} (HF
                          names, Conv1D [in, out]) and DIR/reference.safetensors: tokens, targets,
                          logits, loss, grad.<name> for every parameter, adamw_losses (10 steps).
                          The reference math runs in float64 from the fp32 weights.
  bench --batch B --seq T --steps S [--threads N]
                          times a float32 forward+backward of GPT-2 124M (random weights) on CPU
                          and prints the median and best step seconds (benchmarks/gpt2_bench.cc).
  logits --model DIR --tokens FILE --out FILE
                          loads an HF-style checkpoint folder (e.g. written by zero) and writes
                          the float64-computed logits (as F32) for FILE's "tokens".
Exit code 3 when torch is not importable (the C++ test then skips).
"""
import argparse
import json
import math
import os
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except Exception as error:  # noqa: BLE001
    print(f"torch unavailable: {error}", file=sys.stderr)
    sys.exit(3)

CONFIG = dict(vocab_size=97, n_positions=32, n_embd=64, n_layer=2, n_head=4, n_inner=None,
              layer_norm_epsilon=1e-5, activation_function="gelu_new", initializer_range=0.02,
              tie_word_embeddings=True, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
              bos_token_id=96, eos_token_id=96, model_type="gpt2",
              architectures=["GPT2LMHeadModel"])
BATCH, SEQ = 4, 16
ADAMW = dict(lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, steps=10)

DTYPES = {"F32": (torch.float32, 4), "F64": (torch.float64, 8), "F16": (torch.float16, 2),
          "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "I32": (torch.int32, 4)}
NAMES = {dtype: name for name, (dtype, _) in DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, tensor in tensors.items():
        tensor = tensor.detach().contiguous().cpu()
        data = tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    data = bytearray(raw[8 + size:])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, _ = DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        chunk = data[begin:end]
        tensor = torch.frombuffer(chunk, dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = tensor.reshape(entry["shape"]).clone()
    return tensors, header.get("__metadata__", {})


def load_checkpoint(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    params = {}
    for file in files:
        tensors, _ = read_safetensors(os.path.join(folder, file))
        params.update(tensors)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    return config, params


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def forward(params, config, tokens):
    """logits (B, T, V) of GPT2LMHeadModel (dropout off); params keyed by HF names."""
    return hidden_states(params, config, tokens) @ params["transformer.wte.weight"].t()


def hidden_states(params, config, tokens):
    """GPT2Model's output (B, T, C) after ln_f (dropout off); params keyed by HF names."""
    p = lambda name: params["transformer." + name]  # noqa: E731
    C, NH, eps = config["n_embd"], config["n_head"], config["layer_norm_epsilon"]
    B, T = tokens.shape
    x = p("wte.weight")[tokens] + p("wpe.weight")[torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for layer in range(config["n_layer"]):
        h = f"h.{layer}."
        a = F.layer_norm(x, (C,), p(h + "ln_1.weight"), p(h + "ln_1.bias"), eps)
        qkv = a @ p(h + "attn.c_attn.weight") + p(h + "attn.c_attn.bias")
        q, k, v = qkv.split(C, dim=2)
        heads = lambda t: t.view(B, T, NH, C // NH).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(C // NH)
        scores = torch.where(mask, scores, torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype))
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + (y @ p(h + "attn.c_proj.weight") + p(h + "attn.c_proj.bias"))
        m = F.layer_norm(x, (C,), p(h + "ln_2.weight"), p(h + "ln_2.bias"), eps)
        m = gelu_new(m @ p(h + "mlp.c_fc.weight") + p(h + "mlp.c_fc.bias"))
        x = x + (m @ p(h + "mlp.c_proj.weight") + p(h + "mlp.c_proj.bias"))
    return F.layer_norm(x, (C,), p("ln_f.weight"), p("ln_f.bias"), eps)


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


def random_params(config, generator):
    C, V, L = config["n_embd"], config["vocab_size"], config["n_layer"]
    H = 4 * C
    randn = lambda *shape, std: torch.randn(*shape, generator=generator) * std  # noqa: E731
    params = {"transformer.wte.weight": randn(V, C, std=0.1),
              "transformer.wpe.weight": randn(config["n_positions"], C, std=0.05)}
    for layer in range(L):
        h = f"transformer.h.{layer}."
        params.update({
            h + "ln_1.weight": 1.0 + randn(C, std=0.1), h + "ln_1.bias": randn(C, std=0.05),
            h + "attn.c_attn.weight": randn(C, 3 * C, std=0.1), h + "attn.c_attn.bias": randn(3 * C, std=0.02),
            h + "attn.c_proj.weight": randn(C, C, std=0.05), h + "attn.c_proj.bias": randn(C, std=0.02),
            h + "ln_2.weight": 1.0 + randn(C, std=0.1), h + "ln_2.bias": randn(C, std=0.05),
            h + "mlp.c_fc.weight": randn(C, H, std=0.1), h + "mlp.c_fc.bias": randn(H, std=0.02),
            h + "mlp.c_proj.weight": randn(H, C, std=0.05), h + "mlp.c_proj.bias": randn(C, std=0.02),
        })
    params["transformer.ln_f.weight"] = 1.0 + randn(C, std=0.1)
    params["transformer.ln_f.bias"] = randn(C, std=0.05)
    return {name: tensor.float() for name, tensor in params.items()}


def make_reference(out):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1234)
    config = dict(CONFIG)
    params32 = random_params(config, generator)
    model_dir = os.path.join(out, "model")
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    # A real HF GPT2LMHeadModel file also carries the causal-mask buffers; the loader skips them.
    extra = {f"transformer.h.{layer}.attn.bias": torch.tril(torch.ones(1, 1, 32, 32)) for layer in range(config["n_layer"])}
    write_safetensors(os.path.join(model_dir, "model.safetensors"), {**params32, **extra}, {"format": "pt"})

    tokens = torch.randint(0, config["vocab_size"], (BATCH, SEQ), generator=generator)
    targets = torch.roll(tokens, shifts=-1, dims=1)
    targets[:, -1] = -100
    targets[1, 3] = -100
    targets[2, 7:9] = -100

    params = {name: tensor.double().requires_grad_(True) for name, tensor in params32.items()}
    logits = forward(params, config, tokens)
    loss = loss_of(logits, targets)
    loss.backward()
    result = {"tokens": tokens.to(torch.int64), "targets": targets.to(torch.int64),
              "logits": logits.detach().float(), "loss": loss.detach().float().reshape(1)}
    for name, tensor in params.items():
        result["grad." + name] = tensor.grad.float()

    params = {name: tensor.double().requires_grad_(True) for name, tensor in params32.items()}
    optimizer = torch.optim.AdamW(list(params.values()), lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]),
                                  eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    losses = []
    for _ in range(ADAMW["steps"]):
        optimizer.zero_grad()
        step_loss = loss_of(forward(params, config, tokens), targets)
        step_loss.backward()
        losses.append(step_loss.item())
        optimizer.step()
    result["adamw_losses"] = torch.tensor(losses, dtype=torch.float64)
    write_safetensors(os.path.join(out, "reference.safetensors"), result, ADAMW)


def compute_logits(model, tokens_file, out):
    config, params = load_checkpoint(model)
    params = {(name if name.startswith("transformer.") else "transformer." + name): tensor.double()
              for name, tensor in params.items()}
    tokens = read_safetensors(tokens_file)[0]["tokens"].long()
    with torch.no_grad():
        logits = forward(params, config, tokens)
    write_safetensors(out, {"logits": logits.float()})


def bench(batch, seq, steps, threads):
    import time
    if threads:
        torch.set_num_threads(threads)
    config = dict(CONFIG, vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    generator = torch.Generator().manual_seed(0)
    params = {name: (tensor * 0.2).requires_grad_(True) for name, tensor in random_params(config, generator).items()}
    tokens = torch.randint(0, config["vocab_size"], (batch, seq), generator=generator)
    targets = torch.roll(tokens, shifts=-1, dims=1)
    times = []
    for step in range(steps + 1):
        start = time.perf_counter()
        for tensor in params.values():
            tensor.grad = None
        loss_of(forward(params, config, tokens), targets).backward()
        if step > 0:
            times.append(time.perf_counter() - start)
    times.sort()
    print(f"torch {torch.__version__} threads {torch.get_num_threads()} "
          f"blas {'openblas' if 'openblas' in torch.__config__.show().lower() else 'mkl/other'}")
    print(f"torch_step_seconds median {times[len(times) // 2]:.4f} best {times[0]:.4f} of {len(times)}")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    reference = sub.add_parser("reference")
    reference.add_argument("--out", required=True)
    logits = sub.add_parser("logits")
    logits.add_argument("--model", required=True)
    logits.add_argument("--tokens", required=True)
    logits.add_argument("--out", required=True)
    timing = sub.add_parser("bench")
    timing.add_argument("--batch", type=int, default=4)
    timing.add_argument("--seq", type=int, default=64)
    timing.add_argument("--steps", type=int, default=5)
    timing.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "bench":
        bench(args.batch, args.seq, args.steps, args.threads)
        return
    torch.set_num_threads(1)
    if args.mode == "reference":
        make_reference(args.out)
    else:
        compute_logits(args.model, args.tokens, args.out)


if __name__ == "__main__":
    main()
