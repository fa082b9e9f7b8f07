#!/usr/bin/env python3
"""`zero train --task text-classification` with regression and multi-label labels, against
transformers.

For a tiny GPT-2 and a tiny Llama (grouped-query attention) classifier made by transformers 4.46
(the golden venv) with num_labels, problem_type and a seeded score.weight, saved with
save_pretrained beside a tokenizer `zero tokenizer train` learned on the README:
- regression: a JSON Lines label column of floats (run_classification reads it as regression:
  num_labels 1, MSELoss); multi-label: a column of lists of classes (BCEWithLogitsLoss);
- zero trains 3 full-batch AdamW steps (constant learning rate, clipping at 1) and evaluates;
  torch trains transformers' model the same 3 steps on the same token ids (`zero tokenizer
  encode`): the per-step losses (trainer_state.json's log_history), eval_loss, eval_mse (scikit-
  learn's mean_squared_error) or eval_f1 (micro F1 of logits > 0, as run_classification computes
  it), and the parameters transformers loads from zero's saved folder must agree, and its
  config.json names the problem_type;
- without a checkpoint (from scratch), zero reads the same files as the same problem types and
  writes problem_type regression / multi_label_classification;
- refusals (exit 2) naming the bad value: a non-numeric label under --do_regression, a list
  label whose class the training labels lack, and labels of two kinds in one file.
Without torch or transformers it prints "skipped:" and exits 77.
Usage: classify_problem_types_test.py ZERO SOURCE_DIR WORK_DIR
"""
import json
import math
import os
import shutil
import sys

from cli_checks import check, failures, golden_modules, run, status

zero, source, work = sys.argv[1:4]
SEQ = 16
STEPS = 3
LR = 3e-3

TEXTS = ["the sea and a ship", "a sword and the king", "love and the sea", "war at sea",
         "the king in love", "a ship of war", "quiet fields", "the long road home"]
VALUES = [0.5, -1.25, 2.0, 0.75, -0.5, 1.5, 0.0, -2.0]
CLASSES = [["sea"], ["war"], ["love", "sea"], ["sea", "war"], ["love"], ["sea", "war"], [],
           ["love", "sea", "war"]]


def close(a, b, rel=2e-4, abs_=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def write_data():
    os.makedirs(f"{work}/data")
    with open(f"{work}/data/regression.jsonl", "w", encoding="utf-8") as stream:
        for text, value in zip(TEXTS, VALUES):
            stream.write(json.dumps({"sentence": text, "label": value}) + "\n")
    with open(f"{work}/data/multi.jsonl", "w", encoding="utf-8") as stream:
        for text, classes in zip(TEXTS, CLASSES):
            stream.write(json.dumps({"sentence": text, "label": classes}) + "\n")
    with open(f"{work}/data/texts.txt", "w", encoding="utf-8") as stream:
        stream.write("\n".join(TEXTS) + "\n")


def token_ids(tokenizer_folder, pad):
    out = run([zero, "tokenizer", "encode", "--tokenizer_name", tokenizer_folder, "--lines",
               "--files", f"{work}/data/texts.txt"])
    rows = [[int(t) for t in line.split()][:SEQ] for line in out.strip().split("\n")]
    check(len(rows) == len(TEXTS), f"{len(rows)} rows of ids for {len(TEXTS)} texts")
    check(all(pad not in row for row in rows), "a text holds the pad id")
    return [row + [pad] * (SEQ - len(row)) for row in rows]


def make_model(transformers, torch, family, problem, tokenizer, eos, vocab):
    labels = ["LABEL_0"] if problem == "regression" else ["love", "sea", "war"]
    common = dict(num_labels=len(labels), problem_type=problem,
                  id2label=dict(enumerate(labels)),
                  label2id={label: i for i, label in enumerate(labels)},
                  pad_token_id=eos, bos_token_id=eos, eos_token_id=eos, vocab_size=vocab)
    if family == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=32,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                         **common)
        model_class = transformers.GPT2ForSequenceClassification
    else:
        config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, max_position_embeddings=32,
                                          tie_word_embeddings=False, **common)
        model_class = transformers.LlamaForSequenceClassification
    torch.manual_seed(11)
    model = model_class(config)
    folder = f"{work}/{family}_{problem}_init"
    model.save_pretrained(folder, safe_serialization=True)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(f"{tokenizer}/{name}", folder)
    return folder, model


def zero_flags(model_flags, data, out):
    return [zero, "train", "--task", "text-classification", *model_flags, "--train_file", data,
            "--validation_file", data, "--max_seq_length", str(SEQ),
            "--per_device_train_batch_size", str(len(TEXTS)), "--per_device_eval_batch_size",
            str(len(TEXTS)), "--do_train", "--do_eval", "--max_steps", str(STEPS),
            "--learning_rate", str(LR), "--lr_scheduler_type", "constant", "--logging_steps", "1",
            "--seed", "5", "--save_strategy", "no", "--no_plot", "--output_dir", out]


def torch_reference(torch, model, ids, problem):
    """transformers' model trained as zero trains: full batch, AdamW, clip 1, constant LR."""
    if problem == "regression":
        labels = torch.tensor(VALUES, dtype=torch.float32)
    else:
        names = ["love", "sea", "war"]
        labels = torch.tensor([[float(n in c) for n in names] for c in CLASSES])
    inputs = torch.tensor(ids)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = model(input_ids=inputs, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        output = model(input_ids=inputs, labels=labels)
    logits = output.logits
    if problem == "regression":
        metric = ((logits.squeeze(-1).double() - labels.double()) ** 2).mean().item()
    else:
        predicted = logits > 0
        actual = labels > 0.5
        tp = (predicted & actual).sum().item()
        fp = (predicted & ~actual).sum().item()
        fn = (~predicted & actual).sum().item()
        metric = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return losses, output.loss.item(), metric


def golden(transformers, torch, family, problem, tokenizer, eos, vocab):
    init, model = make_model(transformers, torch, family, problem, tokenizer, eos, vocab)
    kind = "regression" if problem == "regression" else "multi"
    out = f"{work}/{family}_{problem}_zero"
    log = run(zero_flags(["--model_name_or_path", init], f"{work}/data/{kind}.jsonl", out))
    check(f"task: text-classification ({problem})" in log, f"{family} {problem}: task line")
    with open(f"{out}/trainer_state.json", encoding="utf-8") as stream:
        history = json.load(stream)["log_history"]
    zero_losses = [entry["loss"] for entry in history if "loss" in entry]
    with open(f"{out}/eval_results.json", encoding="utf-8") as stream:
        results = json.load(stream)
    ids = token_ids(init, eos)
    losses, eval_loss, metric = torch_reference(torch, model, ids, problem)
    key = "eval_mse" if problem == "regression" else "eval_f1"
    check(len(zero_losses) == STEPS and all(close(a, b) for a, b in zip(zero_losses, losses)),
          f"{family} {problem}: losses {zero_losses}, transformers {losses}")
    check(close(results["eval_loss"], eval_loss),
          f"{family} {problem}: eval_loss {results['eval_loss']}, transformers {eval_loss}")
    check(key in results and close(results[key], metric),
          f"{family} {problem}: {key} {results.get(key)}, transformers {metric}")
    with open(f"{out}/config.json", encoding="utf-8") as stream:
        config = json.load(stream)
    check(config.get("problem_type") == problem,
          f"{family} {problem}: config.json problem_type {config.get('problem_type')}")
    saved = type(model).from_pretrained(out, torch_dtype=torch.float32)
    reference = dict(model.named_parameters())
    # The distance to transformers' parameters against how far training moved them: Adam turns a
    # gradient that is zero but for rounding (GPT-2's key bias) into steps of up to the learning
    # rate, so no element-wise bound holds there; a wrong gradient moves every tensor.
    initial = dict(type(model).from_pretrained(init, torch_dtype=torch.float32).named_parameters())
    differ = moved = 0.0
    for n, p in saved.named_parameters():
        differ += (p - reference[n]).double().pow(2).sum().item()
        moved += (reference[n] - initial[n]).double().pow(2).sum().item()
    worst = math.sqrt(differ / moved)
    check(worst < 1e-2, f"{family} {problem}: saved parameters differ from transformers' by "
          f"{worst:.2e} of training's change")
    print(f"{family} {problem}: losses {', '.join(f'{x:.6f}' for x in zero_losses)} "
          f"(transformers {', '.join(f'{x:.6f}' for x in losses)}), {key} {results[key]:.6f} "
          f"({metric:.6f}), saved parameters within {worst:.1e} of the change")


def from_scratch_and_refusals():
    tiny = ["--config_overrides", "n_layer=1,n_embd=32,n_head=2,n_positions=32",
            "--tokenizer_vocab_size", "300"]
    for kind, problem in (("regression", "regression"), ("multi", "multi_label_classification")):
        out = f"{work}/scratch_{kind}"
        run(zero_flags(tiny, f"{work}/data/{kind}.jsonl", out))
        with open(f"{out}/config.json", encoding="utf-8") as stream:
            config = json.load(stream)
        check(config.get("problem_type") == problem and
              config["num_labels"] == (1 if kind == "regression" else 3),
              f"from scratch {kind}: problem_type {config.get('problem_type')}, num_labels "
              f"{config['num_labels']}")
    bad = f"{work}/data/bad"
    os.makedirs(bad)
    cases = {
        "word.jsonl": ('{"sentence": "a", "label": 1.5}\n{"sentence": "b", "label": "pos"}\n',
                       ["--do_regression"], '"pos" is a string'),
        "word.csv": ('sentence,label\n"a",1.5\n"b",pos\n', ["--do_regression"],
                     "label 'pos', a string where regression"),
        "mixed.jsonl": ('{"sentence": "a", "label": ["x"]}\n{"sentence": "b", "label": "y"}\n',
                        [], 'label "y" is a string, the file\'s first label [\'x\'] a list'),
    }
    for name, (content, flags, expected) in cases.items():
        with open(f"{bad}/{name}", "w", encoding="utf-8") as stream:
            stream.write(content)
        args = zero_flags(tiny, f"{bad}/{name}", f"{work}/refused_{name}") + flags
        log = run(args, expect=2)
        check(expected in log, f"{name}: the refusal does not say {expected!r}: {log[-400:]}")
    with open(f"{bad}/unknown.jsonl", "w", encoding="utf-8") as stream:
        stream.write('{"sentence": "a", "label": ["sea", "peace"]}\n')
    args = zero_flags(tiny, f"{work}/data/multi.jsonl", f"{work}/refused_unknown")
    args[args.index("--validation_file") + 1] = f"{bad}/unknown.jsonl"
    log = run(args, expect=2)
    check("whose class 'peace' is not one of the training labels (love, sea, war)" in log,
          f"unknown class: {log[-400:]}")


def main():
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    write_data()
    tokenizer = f"{work}/tokenizer"
    run([zero, "tokenizer", "train", "--vocab_size", "400", "--output", tokenizer,
         os.path.join(source, "README.md")])
    with open(f"{tokenizer}/vocab.json", encoding="utf-8") as stream:
        vocab = json.load(stream)
    eos = vocab["<|endoftext|>"]
    from_scratch_and_refusals()
    torch, transformers = golden_modules()
    for family in ("gpt2", "llama"):
        for problem in ("regression", "multi_label_classification"):
            golden(transformers, torch, family, problem, tokenizer, eos, len(vocab))
    return status("classification problem types ok")

if __name__ == "__main__":
    sys.exit(main())
