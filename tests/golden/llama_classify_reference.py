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
# case name -> (llama_family_cases case, pad_token_id, batch)
CLASSIFIER_CASES = {name: (name, PAD, BATCH) for name in CASES}
CLASSIFIER_CASES["llama_no_pad_batch_1"] = ("llama_gqa_llama3_untied", None, 1)


def make_tokens(vocab_size, batch, generator):
    tokens = torch.randint(PAD + 1, vocab_size, (batch, SEQ), generator=generator)
    if batch == BATCH:
        tokens[1, 7:] = PAD   # right padding
        tokens[2, 1:] = PAD   # one real token
        tokens[3, 10:] = PAD  # row 0 has no padding: its last token
    labels = torch.tensor([0, 2, -100, 1][:batch])
    return tokens, labels


def write_case(out_dir, name, generator):
    family_case, pad, batch = CLASSIFIER_CASES[name]
    config = build_config(transformers, family_case)
    config._attn_implementation = "eager"
    config.pad_token_id = pad
    config.num_labels = len(ID2LABEL)
    config.id2label = dict(ID2LABEL)
    config.label2id = {label: index for index, label in ID2LABEL.items()}
    model = transformers.AutoModelForSequenceClassification.from_config(config)
    config.architectures = [type(model).__name__]
    tensors = perturbed_params(model, generator)
    folder = os.path.join(out_dir, name)
    config.save_pretrained(folder)
    model = model.double()
    tokens, labels = make_tokens(config.vocab_size, batch, generator)
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
    assert model.config.problem_type == "single_label_classification", model.config.problem_type
    output.loss.backward()
    tensors.update({f"grad.{key}": value.grad.float().contiguous()
                    for key, value in model.named_parameters()})
    tensors["logits"] = output.logits.detach().float().contiguous()
    tensors["loss"] = output.loss.detach().float().reshape(1)
    tensors["tokens"] = tokens.to(torch.int64)
    tensors["labels"] = labels.to(torch.int64)
    save_file(tensors, os.path.join(folder, "reference.safetensors"),
              metadata={"class": type(model).__name__})


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
