#!/usr/bin/env python3
"""A sharded Hugging Face GPT-2 checkpoint as transformers writes it (tests/model/hf_weights_test.cc).

  --out DIR   a tiny random GPT2LMHeadModel (seeded) saved twice with save_pretrained:
              DIR/single (one model.safetensors) and DIR/sharded (max_shard_size="200KB":
              model-0000i-of-0000n.safetensors and model.safetensors.index.json).
Exit code 3 when torch or transformers is not importable.
"""
import argparse
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel
    except Exception as error:  # noqa: BLE001
        print(f"torch/transformers unavailable: {error}", file=sys.stderr)
        sys.exit(3)
    torch.manual_seed(5)
    config = GPT2Config(vocab_size=250, n_positions=32, n_embd=64, n_layer=3, n_head=4)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():  # biases and norms away from their constant initialisation
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    model.save_pretrained(f"{args.out}/single", safe_serialization=True, max_shard_size="100GB")
    model.save_pretrained(f"{args.out}/sharded", safe_serialization=True, max_shard_size="200KB")


if __name__ == "__main__":
    main()
