#!/usr/bin/env python3
"""transformers 4.46's own greedy generation with its KV cache as the oracle of zero's
(tests/golden/generate_golden_test.cc).

Usage: generate_reference.py OUT_DIR
For a tiny random GPT-2 and each case of llama_family_cases.py (grouped-query attention, llama3
scaling, biases, head_dim, Mistral, Qwen2, tied and untied heads) writes OUT_DIR/<case>/config.json
(save_pretrained) and OUT_DIR/<case>/reference.safetensors: the model's random fp32 parameters
(param.<HF name>, drawn with initializer_range 0.2, GPT-2's 0.5, so that continuations vary; norm
weights and biases perturbed from their 1 and 0 so that they count), a prompt of PROMPT random ids,
the whole sequence `model.generate(do_sample=False, use_cache=True, max_new_tokens=NEW)` returns
in fp32 with the eager attention (sequences), and the logits of each generated position (logits,
NEW x V) computed in float64 from the same fp32 weights over that sequence (the exact values, as
the other goldens' are). End-of-sequence stopping is off, so every case generates NEW tokens.
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

PROMPT, NEW = 7, 24
GPT2 = dict(vocab_size=300, n_positions=64, n_embd=48, n_layer=2, n_head=4, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0)


def config_of(name):
    if name == "gpt2":
        return transformers.GPT2Config(**GPT2)
    return build_config(transformers, name)


def write_case(out_dir, name, generator):
    config = config_of(name)
    config._attn_implementation = "eager"
    # Weights 10x (GPT-2: 25x) transformers' default scale: at 0.02 a tied model repeats its last
    # token, a continuation that a wrong cache could give as well.
    config.initializer_range = 0.5 if name == "gpt2" else 0.2
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # norms and biases away from 1 and 0, so that each one counts
        for _, value in model.named_parameters():
            if value.dim() == 1:
                value.add_(0.2 * torch.randn(value.shape, generator=generator))
    folder = os.path.join(out_dir, name)
    config.save_pretrained(folder)
    tensors = {f"param.{key}": value.detach().clone().contiguous()
               for key, value in model.named_parameters()}
    prompt = torch.randint(0, config.vocab_size, (1, PROMPT), generator=generator)
    with torch.no_grad():  # synced_gpus given: its default imports torch 1.13's fsdp, which
        # fails under Python 3.11
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                             use_cache=True, max_new_tokens=NEW, min_new_tokens=NEW,
                             eos_token_id=None, pad_token_id=0,
                             return_dict_in_generate=True, synced_gpus=False)
    tensors["prompt"] = prompt.reshape(-1).to(torch.int64)
    tensors["sequences"] = out.sequences.reshape(-1).to(torch.int64)
    with torch.no_grad():  # the exact logits of those positions: float64 over the sequence
        exact = model.double()(out.sequences).logits[0, PROMPT - 1:-1]
    tensors["logits"] = exact.float().contiguous()
    save_file(tensors, os.path.join(folder, "reference.safetensors"))


def main():
    out_dir = sys.argv[1]
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(4321)
    names = ["gpt2"] + list(CASES)
    for name in names:
        write_case(out_dir, name, generator)
    print(f"{len(names)} greedy generations written by transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
