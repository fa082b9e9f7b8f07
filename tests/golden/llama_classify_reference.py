#!/usr/bin/env python3
"""transformers' own LlamaForSequenceClassification, MistralForSequenceClassification and
Qwen2ForSequenceClassification (4.46) as the oracle of zero's classifier head on the Llama family
(tests/classify/llama_classify_golden_test.cc).

Modes:
  models OUT_DIR   for each case of llama_family_cases.py (and one without pad_token_id, batch 1)
                   writes OUT_DIR/<case>/config.json (save_pretrained, architectures the family's
                   classifier, 3 labels) and OUT_DIR/<case>/reference.safetensors: the model's
                   random fp32 parameters (param.<HF name>; norm weights and biases perturbed
                   from 1 and 0), tokens (B 4, T 12, right-padded) and labels (-100: ignored),
                   then transformers' own forward in float64 from those fp32 values with the eager
                   attention: the pooled logits (B, K), the loss (its single_label rule: labels are
                   ids and K > 1) and every parameter's gradient (grad.<HF name>). The rows are
                   padded so that 4.46's pooling (the token before the first pad) and zero's
                   (the last non-pad token, later transformers') pick the same token.
                   Without a pad_token_id, transformers' refusal of a batch of 2 is checked here.
                   The problem-type cases (GPT-2's transformers model too) leave problem_type
                   unset and let transformers choose it as it does: num_labels 1 -> regression
                   (MSELoss of the squeezed logits against float targets), float multi-hot labels
                   -> multi_label_classification (BCEWithLogitsLoss); their float labels are
                   written as "targets" (B, K) and the chosen type as metadata "problem_type".
  logits MODEL_DIR TOKENS OUT
                   loads MODEL_DIR (e.g. saved by zero) with AutoModelForSequenceClassification
                   and writes its float64 logits for TOKENS' tokens to OUT, with the class it made.
Exits 3 when torch or transformers is not importable.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# (exits 3 when torch or transformers is not importable)
from llama_family_reference import perturbed_params, write_cases  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from llama_family_cases import CASES, build_config  # noqa: E402

BATCH, SEQ, PAD = 4, 12, 5
ID2LABEL = {0: "world", 1: "sports", 2: "science"}
# case name -> (llama_family_cases case, pad_token_id, batch, problem)
CLASSIFIER_CASES = {name: (name, PAD, BATCH, "single") for name in CASES}
CLASSIFIER_CASES["llama_no_pad_batch_1"] = ("llama_gqa_llama3_untied", None, 1, "single")
CLASSIFIER_CASES["llama_regression"] = ("llama_gqa_llama3_untied", PAD, BATCH, "regression")
CLASSIFIER_CASES["qwen2_multi_label"] = ("qwen2_untied", PAD, BATCH, "multi_label")
CLASSIFIER_CASES["gpt2_regression"] = ("gpt2", PAD, BATCH, "regression")
CLASSIFIER_CASES["gpt2_multi_label"] = ("gpt2", PAD, BATCH, "multi_label")
REGRESSION_TARGETS = [0.75, -1.25, 2.0, 0.3]
MULTI_HOT = [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]


def classifier_config(family_case):
    if family_case == "gpt2":  # transformers' GPT2ForSequenceClassification
        return transformers.GPT2Config(vocab_size=300, n_positions=64, n_embd=48, n_layer=2,
                                       n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                       summary_first_dropout=0.0, bos_token_id=299,
                                       eos_token_id=299)
    return build_config(transformers, family_case)


def make_labels(problem, batch):
    """The labels as transformers takes them for each problem type."""
    if problem == "regression":
        return torch.tensor(REGRESSION_TARGETS[:batch], dtype=torch.float64)
    if problem == "multi_label":
        return torch.tensor(MULTI_HOT[:batch], dtype=torch.float64)
    return torch.tensor([0, 2, -100, 1][:batch])


def make_tokens(vocab_size, batch, generator):
    tokens = torch.randint(PAD + 1, vocab_size, (batch, SEQ), generator=generator)
    if batch == BATCH:
        tokens[1, 7:] = PAD   # right padding
        tokens[2, 1:] = PAD   # one real token
        tokens[3, 10:] = PAD  # row 0 has no padding: its last token
    return tokens


def write_case(out_dir, name, generator):
    family_case, pad, batch, problem = CLASSIFIER_CASES[name]
    config = classifier_config(family_case)
    config._attn_implementation = "eager"
    config.pad_token_id = pad
    if problem == "regression":
        config.num_labels = 1
    else:
        config.num_labels = len(ID2LABEL)
        config.id2label = dict(ID2LABEL)
        config.label2id = {label: index for index, label in ID2LABEL.items()}
    model = transformers.AutoModelForSequenceClassification.from_config(config)
    config.architectures = [type(model).__name__]
    tensors = perturbed_params(model, generator)
    folder = os.path.join(out_dir, name)
    config.save_pretrained(folder)
    model = model.double()
    tokens = make_tokens(config.vocab_size, batch, generator)
    labels = make_labels(problem, batch)
    if pad is not None:  # 4.46's rule and the last non-pad token agree on these rows
        first_pad_rule = (torch.eq(tokens, pad).int().argmax(-1) - 1) % SEQ
        last_non_pad = (torch.arange(SEQ) * (tokens != pad).int()).argmax(-1)
        assert torch.equal(first_pad_rule, last_non_pad), (first_pad_rule, last_non_pad)
    else:
        try:
            model(input_ids=torch.cat([tokens, tokens]))
            raise AssertionError("transformers classified 2 rows without a pad_token_id")
        except ValueError as error:
            assert "padding token" in str(error), error
    output = model(input_ids=tokens, labels=labels)
    chosen = {"single": "single_label_classification", "regression": "regression",
              "multi_label": "multi_label_classification"}[problem]
    assert model.config.problem_type == chosen, (model.config.problem_type, chosen)
    output.loss.backward()
    tensors.update({f"grad.{key}": value.grad.float().contiguous()
                    for key, value in model.named_parameters()})
    tensors["logits"] = output.logits.detach().float().contiguous()
    tensors["loss"] = output.loss.detach().float().reshape(1)
    tensors["tokens"] = tokens.to(torch.int64)
    if problem == "single":
        tensors["labels"] = labels.to(torch.int64)
    else:
        tensors["targets"] = labels.float().reshape(batch, config.num_labels).contiguous()
    save_file(tensors, os.path.join(folder, "reference.safetensors"),
              metadata={"class": type(model).__name__, "problem_type": chosen})


def logits(model_dir, tokens_file, out):
    from transformers.utils import logging
    logging.set_verbosity_error()
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        model_dir, attn_implementation="eager").double().eval()
    tokens = load_file(tokens_file)["tokens"].long()
    with torch.no_grad():
        result = model(input_ids=tokens).logits
    save_file({"logits": result.contiguous()}, out, metadata={"class": type(model).__name__})


def main():
    if sys.argv[1] == "logits":
        logits(*sys.argv[2:5])
        return
    write_cases(sys.argv[2], CLASSIFIER_CASES, write_case, 4321, "classifiers")


if __name__ == "__main__":
    main()
