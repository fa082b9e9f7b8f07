#!/usr/bin/env python3
"""`zero train --task text-classification` on Llama-family causal-LM folders, end to end.

For Llama (scripts/make_llama_folder.sh: GQA, an untied head) and Qwen2 (the same folder with
model_type qwen2: q/k/v biases): a causal LM trained a few steps from the folder is the
--model_name_or_path of a classifier trained on the fortunes classification data
(scripts/fortunes_classification_data.sh; 256 train, 64 validation and 64 test rows of its four
classes). Checks: the run exits 0 and warns as transformers'
from_pretrained does (lm_head.weight not used, score.weight newly initialized); the saved folder is
a <Family>ForSequenceClassification with score.weight and without lm_head.weight; loaded back
(--do_eval only) it keeps its score.weight: the same eval_loss, bit for bit, and no warning.
Golden (the venv's transformers 4.46): AutoModelForSequenceClassification loads the saved folder
and gives zero's test loss and predictions on the same token ids (zero tokenizer encode). An LM
config's pad_token_id pads the examples; one with neither pad_token_id nor eos_token_id is refused
(exit 2) naming pad_token_id.
Without torch or transformers the zero checks still run, then it exits 77 (skipped).
Usage: llama_classify_cli_test.py ZERO SOURCE_DIR WORK_DIR
"""
import csv
import json
import math
import os
import shutil
import struct
import sys

from cli_checks import check, failures, golden_modules, run, status

zero, source, work = sys.argv[1:4]
SEQ = 48  # --max_seq_length
TESTS = 64  # --max_predict_samples


def tensor_names(folder):
    with open(os.path.join(folder, "model.safetensors"), "rb") as stream:
        (size,) = struct.unpack("<Q", stream.read(8))
        header = json.loads(stream.read(size))
    return {name for name in header if name != "__metadata__"}


def make_folders():
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    run([os.path.join(source, "scripts/make_llama_folder.sh"), f"{work}/llama", zero])
    run([os.path.join(source, "scripts/fortunes_classification_data.sh"), f"{work}/data"])
    # The files list the classes one after another: every k-th row, so each split mixes them.
    for split, count in (("train", 256), ("validation", 64), ("test", TESTS)):
        path = f"{work}/data/{split}.csv"
        with open(path, encoding="utf-8", newline="") as stream:
            rows = list(csv.reader(stream))
        body = rows[1:][:: max(1, (len(rows) - 1) // count)][:count]
        with open(path, "w", encoding="utf-8", newline="") as stream:
            csv.writer(stream, lineterminator="\n").writerows(rows[:1] + body)
    shutil.copytree(f"{work}/llama", f"{work}/qwen2")
    with open(f"{work}/qwen2/config.json", encoding="utf-8") as stream:
        config = json.load(stream)
    config.update(model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    with open(f"{work}/qwen2/config.json", "w", encoding="utf-8") as stream:
        json.dump(config, stream, indent=2)


def classify_flags(model, out):
    data = f"{work}/data"
    return [zero, "train", "--task", "text-classification", "--model_name_or_path", model,
            "--train_file", f"{data}/train.csv", "--validation_file", f"{data}/validation.csv",
            "--test_file", f"{data}/test.csv", "--text_column_names", "text",
            "--label_column_name", "label", "--max_seq_length", str(SEQ),
            "--per_device_train_batch_size", "8",
            "--learning_rate", "1e-3", "--num_train_epochs", "1", "--seed", "3",
            "--save_strategy", "no", "--no_plot", "--output_dir", out]


def train(family):
    """The LM, the classifier from it, and the classifier loaded back; returns its folder."""
    lm, out, again = f"{work}/{family}_lm", f"{work}/{family}_cls", f"{work}/{family}_again"
    run([zero, "train", "--config_name", f"{work}/{family}", "--tokenizer_name",
         f"{work}/{family}", "--train_file", os.path.join(source, "README.md"), "--do_train",
         "--block_size", "64", "--max_steps", "3", "--per_device_train_batch_size", "4",
         "--no_plot", "--output_dir", lm])
    check("lm_head.weight" in tensor_names(lm), f"{family}: the LM folder has no untied head")
    classifier = {"llama": "LlamaForSequenceClassification",
                  "qwen2": "Qwen2ForSequenceClassification"}[family]
    log = run(classify_flags(lm, out) + ["--do_train", "--do_eval", "--do_predict"])
    check(f"some weights of the model checkpoint at {lm} were not used when initializing "
          f"{classifier}: ['lm_head.weight']" in log, f"{family}: no lm_head.weight warning")
    check(f"some weights of {classifier} were not initialized from the model checkpoint at {lm} "
          "and are newly initialized: ['score.weight']" in log,
          f"{family}: no score.weight warning")
    with open(f"{out}/config.json", encoding="utf-8") as stream:
        config = json.load(stream)
    check(config["architectures"] == [classifier],
          f"{family}: architectures {config['architectures']}")
    names = tensor_names(out)
    check("score.weight" in names and "lm_head.weight" not in names,
          f"{family}: saved tensors: score.weight {'score.weight' in names}, lm_head.weight "
          f"{'lm_head.weight' in names}")
    log = run(classify_flags(out, again) + ["--do_eval"])
    check("score.weight from the checkpoint" in log and "warning:" not in log,
          f"{family}: loading the saved classifier: {log[:600]}")
    losses = []
    for folder in (out, again):
        with open(f"{folder}/eval_results.json", encoding="utf-8") as stream:
            losses.append(json.load(stream)["eval_loss"])
    check(losses[0] == losses[1], f"{family}: eval_loss {losses[0]} after training, {losses[1]} "
          "loaded back (score.weight not kept?)")
    print(f"{family}: zero trains, saves and reloads the classifier (eval_loss {losses[0]:.6f})")
    return out


def with_config(folder, copy, **changes):
    shutil.copytree(folder, copy)
    with open(f"{copy}/config.json", encoding="utf-8") as stream:
        config = json.load(stream)
    config.update(changes)
    with open(f"{copy}/config.json", "w", encoding="utf-8") as stream:
        json.dump(config, stream, indent=2)
    return copy


def check_pad_token_id():
    """An LM config's pad_token_id pads the examples; without it and eos, the run is refused."""
    lm = f"{work}/llama_lm"
    padded = with_config(lm, f"{work}/pad_lm", pad_token_id=5)
    log = run(classify_flags(padded, f"{work}/pad_cls") + ["--do_eval"])
    check("pad_token_id 5," in log, f"config.json's pad_token_id 5 not used: {log[:400]}")
    bare = with_config(lm, f"{work}/bare_lm", eos_token_id=None, pad_token_id=None)
    log = run(classify_flags(bare, f"{work}/bare_cls") + ["--do_eval"], expect=2)
    check("config.json has no pad_token_id" in log and "batch sizes > 1" in log,
          f"no pad_token_id: {log[-600:]}")


def token_ids(folder, texts, pad):
    path = f"{work}/texts.txt"
    with open(path, "w", encoding="utf-8") as stream:
        stream.write("\n".join(texts) + "\n")
    out = run([zero, "tokenizer", "encode", "--tokenizer_name", folder, "--lines", "--files", path])
    rows = [[int(t) for t in line.split()] for line in out.strip().split("\n")]
    check(len(rows) == len(texts), f"{len(rows)} rows of ids for {len(texts)} texts")
    check(all(pad not in row[:SEQ] for row in rows), "a text holds the pad id")
    return [row[:SEQ] + [pad] * (SEQ - len(row[:SEQ])) for row in rows]


def compare_with_transformers(family, folder, torch, auto_model):
    model = auto_model.from_pretrained(folder, torch_dtype=torch.float32).eval()
    with open(f"{folder}/config.json", encoding="utf-8") as stream:
        config = json.load(stream)
    check(type(model).__name__ == config["architectures"][0], f"{family}: {type(model).__name__}")
    with open(f"{work}/data/test.csv", encoding="utf-8", newline="") as stream:
        rows = list(csv.DictReader(stream))[:TESTS]
    label2id = config["label2id"]
    ids = torch.tensor(token_ids(folder, [row["text"] for row in rows], config["pad_token_id"]))
    labels = torch.tensor([label2id[row["label"]] for row in rows])
    with torch.no_grad():
        output = model(input_ids=ids, labels=labels)
    with open(f"{folder}/test_results.json", encoding="utf-8") as stream:
        results = json.load(stream)
    loss = output.loss.item()
    check(math.isclose(loss, results["test_loss"], rel_tol=2e-5),
          f"{family}: test loss {results['test_loss']}, transformers {loss}")
    top = output.logits.topk(2, dim=-1)
    for i, predicted in enumerate(results["predictions"]):
        margin = (top.values[i, 0] - top.values[i, 1]).item()
        check(predicted == top.indices[i, 0].item() or margin < 1e-5,
              f"{family}: example {i} predicted {predicted}, transformers "
              f"{top.indices[i, 0].item()} (margin {margin:.2e})")
    print(f"{family}: transformers' {type(model).__name__} gives zero's test loss {loss:.6f} "
          f"(zero {results['test_loss']:.6f}) and its {len(rows)} predictions")


def main():
    if not os.path.isfile("/usr/share/games/fortunes/computers"):
        print("skipped: no fortunes corpus (the Debian package 'fortunes')")
        return 77
    make_folders()
    folders = {family: train(family) for family in ("llama", "qwen2")}
    check_pad_token_id()
    torch, transformers = golden_modules()
    for family, folder in folders.items():
        compare_with_transformers(family, folder, torch,
                                  transformers.AutoModelForSequenceClassification)
    return status("llama classify cli ok")

if __name__ == "__main__":
    sys.exit(main())
