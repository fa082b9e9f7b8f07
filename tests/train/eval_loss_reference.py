#!/usr/bin/env python3
"""PyTorch reference for zero train's eval_loss (tests/train/trainer_golden_test.cc).

  eval_loss_reference.py --vocab V --blocks FILE --out DIR
writes a random tiny GPT-2 (vocabulary V) as a Hugging Face checkpoint DIR/{config.json,
model.safetensors} and prints the float64 mean next-token cross-entropy over FILE's blocks (one
block of token ids per line), as run_clm's evaluation counts it (labels = inputs, shifted); then,
with --label_smoothing E, the same loss label-smoothed as Hugging Face's LabelSmoother computes it
(cross_entropy(label_smoothing=E)) on a second line.

  eval_loss_reference.py --blocks FILE --transformers DIR
prints the same float64 mean loss of the model zero saved in DIR, as transformers'
GPT2LMHeadModel.from_pretrained(DIR) computes it (labels = input_ids: the model shifts them).
Exit code 3 when torch (or, with --transformers, transformers) is not importable (the C++ test
then skips).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
import gpt2_reference as ref  # noqa: E402  (exits 3 without torch)

torch = ref.torch


def transformers_loss(folder, blocks):
    try:
        from transformers import GPT2LMHeadModel
        from transformers.utils import logging
    except Exception as error:  # noqa: BLE001
        print(f"transformers unavailable: {error}", file=sys.stderr)
        sys.exit(3)
    logging.set_verbosity_error()
    model = GPT2LMHeadModel.from_pretrained(folder).double().eval()
    tokens = torch.tensor(blocks, dtype=torch.long)
    with torch.no_grad():
        return model(input_ids=tokens, labels=tokens).loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab", type=int)
    parser.add_argument("--blocks", required=True)
    parser.add_argument("--out")
    parser.add_argument("--label_smoothing", type=float, default=None)
    parser.add_argument("--transformers", metavar="DIR")
    args = parser.parse_args()
    with open(args.blocks) as f:
        blocks = [[int(word) for word in line.split()] for line in f if line.strip()]
    if args.transformers is not None:
        print(f"{transformers_loss(args.transformers, blocks):.17g}")
        return
    if args.vocab is None or args.out is None:
        parser.error("--vocab and --out are required without --transformers")
    seq = len(blocks[0])
    config = dict(ref.CONFIG, vocab_size=args.vocab, n_positions=seq, bos_token_id=args.vocab - 1,
                  eos_token_id=args.vocab - 1)
    params = ref.random_params(config, torch.Generator().manual_seed(4321))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    ref.write_safetensors(os.path.join(args.out, "model.safetensors"), params, {"format": "pt"})
    params64 = {name: tensor.double() for name, tensor in params.items()}
    tokens = torch.tensor(blocks, dtype=torch.long)
    logits = ref.forward(params64, config, tokens)
    loss = ref.loss_of(logits[:, :-1, :], tokens[:, 1:])
    print(f"{loss.item():.17g}")
    if args.label_smoothing is not None:
        V = logits.shape[-1]
        smoothed = torch.nn.functional.cross_entropy(
            logits[:, :-1, :].reshape(-1, V), tokens[:, 1:].reshape(-1),
            label_smoothing=args.label_smoothing)
        print(f"{smoothed.item():.17g}")


if __name__ == "__main__":
    main()
