#!/usr/bin/env python3
"""References for zero's GPT-2 sequence classification (tests/classify/classify_golden_test.cc).

Modes:
  model --out DIR       a tiny random GPT2ForSequenceClassification, its forward written in plain
                        torch as transformers' modeling_gpt2 computes it (pooled logits of the last
                        non-padding token: argmax over t of t * (tokens != pad_token_id); mean
                        cross-entropy) -> DIR/model/{config.json, model.safetensors} (HF names) and
                        DIR/reference.safetensors: tokens, labels, logits (B, K), loss, grad.<name>.
                        Float64 math from the fp32 weights. Where transformers is importable, its
                        GPT2ForSequenceClassification must give the same logits (checked here).
  logits --model DIR --tokens FILE --out FILE
                        loads a classifier checkpoint (e.g. saved by zero), writes the reference's
                        pooled logits; with transformers, from_pretrained's error against them
                        (hf_relative_error, over hf_rows rows).
  report --in FILE --out FILE
                        scikit-learn's classification_report (labels 0..K-1, target_names,
                        zero_division=0): its text and output_dict, and confusion_matrix.
Exit code 3 when torch (model, logits) or scikit-learn (report) is not importable.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def report(inp, out):
    try:
        from sklearn.metrics import classification_report, confusion_matrix
    except Exception as error:  # noqa: BLE001
        print(f"scikit-learn unavailable: {error}", file=sys.stderr)
        sys.exit(3)
    with open(inp) as f:
        data = json.load(f)
    labels = list(range(len(data["labels"])))
    kwargs = dict(labels=labels, target_names=data["labels"], zero_division=0)
    result = {"text": classification_report(data["y_true"], data["y_pred"], digits=data.get("digits", 2), **kwargs),
              "dict": classification_report(data["y_true"], data["y_pred"], output_dict=True, **kwargs),
              "confusion": confusion_matrix(data["y_true"], data["y_pred"], labels=labels).tolist()}
    with open(out, "w") as f:
        json.dump(result, f)


try:
    import torch
    import torch.nn.functional as F
except Exception as error:  # noqa: BLE001
    torch = None
    TORCH_ERROR = error
if torch is not None:  # (gpt2_reference exits 3 on import without torch)
    from gpt2_reference import hidden_states, load_checkpoint, random_params, read_safetensors, write_safetensors

CONFIG = dict(vocab_size=97, n_positions=32, n_embd=64, n_layer=2, n_head=4, n_inner=None,
              layer_norm_epsilon=1e-5, activation_function="gelu_new", initializer_range=0.02,
              tie_word_embeddings=True, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
              summary_first_dropout=0.0, bos_token_id=96, eos_token_id=96, pad_token_id=96,
              model_type="gpt2", architectures=["GPT2ForSequenceClassification"],
              id2label={"0": "science", "1": "politics", "2": "computers"},
              label2id={"science": 0, "politics": 1, "computers": 2})
BATCH, SEQ = 5, 16


def pooled_logits(params, config, tokens):
    """GPT2ForSequenceClassification's logits (B, K); params keyed by HF names."""
    B, T = tokens.shape
    x = hidden_states(params, config, tokens)
    logits = x @ params["score.weight"].t()  # (B, T, K), score has no bias
    non_pad = (tokens != config["pad_token_id"]).int()
    last = (torch.arange(T) * non_pad).argmax(-1)
    return logits[torch.arange(B), last]


def transformers_error(folder, tokens, expected, pad_token_id):
    """(max |diff| / max |expected|, rows compared) of transformers' GPT2ForSequenceClassification
    loaded from `folder` against `expected`, or None without transformers. Only rows where the
    two pooling rules agree are compared: transformers before 4.48 (4.46 in the venv) pools the
    token before the first pad, later ones the last non-pad token (the reference's)."""
    try:
        from transformers import GPT2ForSequenceClassification
        from transformers.utils import logging
        logging.set_verbosity_error()
    except Exception:  # noqa: BLE001
        return None
    model = GPT2ForSequenceClassification.from_pretrained(folder).double().eval()
    with torch.no_grad():
        logits = model(input_ids=tokens).logits
    T = tokens.shape[1]
    first_pad_rule = (torch.eq(tokens, pad_token_id).int().argmax(-1) - 1) % T
    last_non_pad = (torch.arange(T) * (tokens != pad_token_id).int()).argmax(-1)
    rows = first_pad_rule == last_non_pad
    error = (logits[rows] - expected[rows]).abs().max().item() / expected[rows].abs().max().item()
    return error, int(rows.sum())


def make_model(out):
    generator = torch.Generator().manual_seed(4321)
    config = dict(CONFIG)
    K = len(config["id2label"])
    params32 = random_params(config, generator)
    params32["score.weight"] = (torch.randn(K, config["n_embd"], generator=generator) * 0.2).float()
    model_dir = os.path.join(out, "model")
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(model_dir, "model.safetensors"), params32, {"format": "pt"})
    pad = config["pad_token_id"]
    tokens = torch.randint(0, pad, (BATCH, SEQ), generator=generator)
    tokens[0, 9:] = pad    # right padding
    tokens[1, 1:] = pad    # one real token
    tokens[2, :] = pad     # all padding: position 0
    tokens[3, 5] = pad     # a pad inside the text counts as a token before the last real one
    labels = torch.tensor([0, 2, 1, 2, 0])
    params = {name: tensor.double().requires_grad_(True) for name, tensor in params32.items()}
    logits = pooled_logits(params, config, tokens)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    result = {"tokens": tokens.to(torch.int64), "labels": labels.to(torch.int64),
              "logits": logits.detach().float(), "loss": loss.detach().float().reshape(1)}
    for name, tensor in params.items():
        result["grad." + name] = tensor.grad.float()
    hf = transformers_error(model_dir, tokens, logits.detach(), pad)
    if hf is not None:
        print(f"transformers GPT2ForSequenceClassification vs plain torch: relative error {hf[0]:.3g} "
              f"over {hf[1]} of {BATCH} rows")
        if hf[0] > 1e-6:
            sys.exit(1)
    write_safetensors(os.path.join(out, "reference.safetensors"), result)


def compute_logits(folder, tokens_file, out):
    config, params = load_checkpoint(folder)
    params = {(name if name.startswith("transformer.") or name == "score.weight" else "transformer." + name):
              tensor.double() for name, tensor in params.items()}
    tokens = read_safetensors(tokens_file)[0]["tokens"].long()
    with torch.no_grad():
        result = {"logits": pooled_logits(params, config, tokens).float()}
    hf = transformers_error(folder, tokens, result["logits"].double(), config["pad_token_id"])
    if hf is not None:
        result["hf_relative_error"] = torch.tensor([hf[0]], dtype=torch.float64)
        result["hf_rows"] = torch.tensor([hf[1]], dtype=torch.int64)
    write_safetensors(out, result)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("model").add_argument("--out", required=True)
    logits = sub.add_parser("logits")
    logits.add_argument("--model", required=True)
    logits.add_argument("--tokens", required=True)
    logits.add_argument("--out", required=True)
    metrics = sub.add_parser("report")
    metrics.add_argument("--in", dest="inp", required=True)
    metrics.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.mode == "report":
        report(args.inp, args.out)
        return
    if torch is None:
        print(f"torch unavailable: {TORCH_ERROR}", file=sys.stderr)
        sys.exit(3)
    torch.set_num_threads(1)
    if args.mode == "model":
        make_model(args.out)
    else:
        compute_logits(args.model, args.tokens, args.out)


if __name__ == "__main__":
    main()
