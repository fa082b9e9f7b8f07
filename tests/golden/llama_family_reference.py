#!/usr/bin/env python3
"""transformers' own Llama, Mistral and Qwen2 (4.46) as the oracle of zero's decoder
(tests/golden/llama_family_golden_test.cc).

Usage: llama_family_reference.py OUT_DIR
For each case of llama_family_cases.py writes OUT_DIR/<case>/config.json (save_pretrained) and
OUT_DIR/<case>/reference.safetensors: the model's random fp32 parameters (param.<HF name>; the
norm weights and biases perturbed from their 1 and 0 so that they count), tokens and targets
(B 2, T 12; -100 marks ignored targets), then, computed in float64 from those fp32 values with the
eager attention: the logits over the real vocabulary, the mean cross-entropy, every parameter's
gradient (grad.<HF name>; a tied head's gradient is the embedding's) and the losses of 20
torch.optim.AdamW steps on the same batch (adamw_losses; hyperparameters in the metadata).
Exits 3 when torch or transformers is not importable.
"""
import contextlib
import io
import os
import sys

try:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        import torch
        import transformers
        from safetensors.torch import save_file
except Exception as error:  # noqa: BLE001 - any import failure means "skip"
    print(f"torch or transformers not importable: {error}", file=sys.stderr)
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_family_cases import CASES, build_config  # noqa: E402

BATCH, SEQ = 2, 12
ADAMW = dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
STEPS = 20


def loss_of(model, tokens, targets):
    logits = model(input_ids=tokens).logits
    vocab = logits.shape[-1]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1),
                                             ignore_index=-100)
    return logits, loss


def perturbed_params(model, generator):
    """Moves the model's norms and biases away from 1 and 0, so that each one counts, and returns
    its fp32 parameters as param.<HF name>."""
    with torch.no_grad():
        for value in model.parameters():
            if value.dim() == 1:
                value.add_(0.2 * torch.randn(value.shape, generator=generator))
    return {f"param.{key}": value.detach().clone().contiguous()
            for key, value in model.named_parameters()}


def write_cases(out_dir, names, write, seed, what):
    """write(out_dir, name, generator) for each name, one generator seeded `seed`."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(seed)
    for name in names:
        write(out_dir, name, generator)
    print(f"{len(names)} {what} written by transformers {transformers.__version__}")


def write_case(out_dir, name, generator):
    config = build_config(transformers, name)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config)
    tensors = perturbed_params(model, generator)
    folder = os.path.join(out_dir, name)
    config.save_pretrained(folder)
    model = model.double()
    tokens = torch.randint(0, config.vocab_size, (BATCH, SEQ), generator=generator)
    targets = torch.roll(tokens, -1, dims=1)
    targets[:, -1] = -100
    targets[0, 3] = -100
    logits, loss = loss_of(model, tokens, targets)
    loss.backward()
    tensors.update({f"grad.{key}": value.grad.float().contiguous()
                    for key, value in model.named_parameters()})
    tensors["logits"] = logits.detach().float().contiguous()
    tensors["loss"] = loss.detach().float().reshape(1)
    tensors["tokens"] = tokens.to(torch.int64)
    tensors["targets"] = targets.to(torch.int64)
    model.zero_grad()
    optimizer = torch.optim.AdamW(model.parameters(), **ADAMW)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        _, step_loss = loss_of(model, tokens, targets)
        step_loss.backward()
        optimizer.step()
        losses.append(step_loss.item())
    tensors["adamw_losses"] = torch.tensor(losses, dtype=torch.float64)
    metadata = {"lr": str(ADAMW["lr"]), "beta1": str(ADAMW["betas"][0]),
                "beta2": str(ADAMW["betas"][1]), "eps": str(ADAMW["eps"]),
                "weight_decay": str(ADAMW["weight_decay"])}
    save_file(tensors, os.path.join(folder, "reference.safetensors"), metadata=metadata)


def main():
    write_cases(sys.argv[1], CASES, write_case, 1234, "models")


if __name__ == "__main__":
    main()
