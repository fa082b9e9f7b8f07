#!/usr/bin/env python3
"""`zero generate` against transformers 4.46 (the golden venv) on a tiny GPT-2 it saves.

Builds a byte-level BPE tokenizer (tokenizers, trained on README.md, with a special token
<|sep|> and a non-special added token <|keep|>) and a random GPT2LMHeadModel, saved with
save_pretrained into WORK/model. For each prompt, transformers' text-generation pipeline
(do_sample=False) gives the text `zero generate --prompt` must print, byte for byte, and
model.generate the ids `zero generate --prompt_ids` must print; a copy whose config.json has a list
of eos ids checks the stop. Then the exit codes: bad command lines and folders are refused (2) by
name. Exit 77 (skipped) when torch, transformers or tokenizers cannot be imported.
Usage: generate_text_test.py ZERO SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import torch
    import transformers.generation.utils as generation_utils
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast, pipeline
    from transformers.utils import logging as hf_logging
except Exception as error:  # noqa: BLE001
    print(f"skipped: the golden venv is not there ({error})")
    sys.exit(77)

# generate() asks whether the model is FSDP-wrapped by importing torch.distributed.fsdp, which
# torch 1.13 cannot import under Python 3.11. It is not: a plain module on one process.
generation_utils.is_fsdp_managed_module = lambda module: False
hf_logging.set_verbosity_error()

PROMPTS = [
    ("To be, or", 20),
    ("Hello world", 12),
    ("<|sep|>the model, and", 16),  # a special token in the text: recognised, skipped in the output
    ("zero <|keep|> train", 10),  # an added token that is not special: kept
    ("Wait , what ? It 's here .", 16),  # clean_up_tokenization_spaces
    ("na\u00efve caf\u00e9 \U0001F642 \u6f22\u5b57", 24),  # multi-byte; tokens may split characters
    ("  spaces\tand\nlines", 8),
    ("The", 1),
]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def build(source, folder):
    with open(os.path.join(source, "README.md"), encoding="utf-8") as stream:
        corpus = stream.read()
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([corpus], vocab_size=600, min_frequency=2,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    os.makedirs(folder)
    bpe.save_model(folder)
    tokenizer = GPT2TokenizerFast(vocab_file=os.path.join(folder, "vocab.json"),
                                  merges_file=os.path.join(folder, "merges.txt"))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|sep|>"]})
    tokenizer.add_tokens(["<|keep|>"])
    torch.manual_seed(38)
    # A wide initialisation keeps the greedy choices far apart (checked below).
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        initializer_range=0.5, bos_token_id=tokenizer.eos_token_id,
                        eos_token_id=tokenizer.eos_token_id)
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


def reference(folder, prompt, max_new_tokens):
    """The pipeline's text, generate()'s ids, and the smallest gap between the two best logits."""
    generator = pipeline("text-generation", model=folder, tokenizer=folder, device="cpu")
    text = generator(prompt, max_new_tokens=max_new_tokens, do_sample=False)[0]["generated_text"]
    tokenizer, model = generator.tokenizer, generator.model
    input_ids = tokenizer(prompt, return_tensors="pt").input_ids
    output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                            max_new_tokens=max_new_tokens, do_sample=False,
                            pad_token_id=tokenizer.eos_token_id, output_scores=True,
                            return_dict_in_generate=True)
    gap = min((float(s.topk(2).values[0, 0] - s.topk(2).values[0, 1]) for s in output.scores),
              default=1.0)
    return text, input_ids[0].tolist(), output.sequences[0].tolist(), gap


def find_prompts(source, model, tokenizer):
    """Prompts (from README's words) whose greedy continuation exercises what the pipeline does to
    the text: transformers' clean-up changes the continuation, a special token (<|sep|>) is
    generated and skipped, an added token that is not special (<|keep|>) is generated and kept,
    generation stops at eos. The random model decides which prompts do."""
    with open(os.path.join(source, "README.md"), encoding="utf-8") as stream:
        words = list(dict.fromkeys(stream.read().split()))[:600]
    eos, sep, keep = (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|sep|>"),
                      tokenizer.convert_tokens_to_ids("<|keep|>"))

    def decoded(ids, clean):
        return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=clean)

    wanted = {"clean-up": None, "special token generated": None, "added token generated": None,
              "eos": None}
    for word in words:
        for prompt in (word, word + " "):
            ids = tokenizer(prompt).input_ids
            sequence = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)),
                                      max_new_tokens=24, do_sample=False,
                                      pad_token_id=eos)[0].tolist()
            new = sequence[len(ids):]
            found = {
                "clean-up": decoded(sequence, True)[len(decoded(ids, True)):] !=
                decoded(sequence, False)[len(decoded(ids, False)):],
                "special token generated": sep in new,
                "added token generated": keep in new,
                "eos": eos in new,
            }
            for name, hit in found.items():
                if hit and wanted[name] is None:
                    wanted[name] = (prompt, 24)
            if all(wanted.values()):
                return list(wanted.values())
    for name, prompt in wanted.items():
        check(prompt is not None, f"no README word makes the model show {name}")
    return [prompt for prompt in wanted.values() if prompt]


def zero(binary, *words):
    run = subprocess.run([binary, "generate", *words, "--use_cpu"], capture_output=True)
    return run.returncode, run.stdout, run.stderr.decode("utf-8", "replace")


def expect_refused(binary, words, needle):
    code, _, stderr = zero(binary, *words)
    check(code == 2 and needle in stderr,
          f"{' '.join(words)}: expected exit 2 naming '{needle}', got {code}: {stderr.strip()}")


def main():
    binary, source, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    folder = os.path.join(work, "model")
    model, tokenizer = build(source, folder)

    searched = find_prompts(source, model, tokenizer)
    print("prompts found:", searched)
    stopped = 0
    ties = []  # prompts whose greedy choice is a near tie somewhere: fp32 sums may pick either
    for prompt, max_new_tokens in PROMPTS + searched:
        text, prompt_ids, sequence, gap = reference(folder, prompt, max_new_tokens)
        if gap <= 1e-3:  # the model (trained on README.md's words) changes with README.md
            print(f"skipped {prompt!r}: greedy logits {gap:.2g} apart, too close to compare")
            ties.append(prompt)
            continue
        stopped += len(sequence) < len(prompt_ids) + max_new_tokens
        code, stdout, stderr = zero(binary, "--model_name_or_path", folder, "--prompt", prompt,
                                    "--max_new_tokens", str(max_new_tokens))
        check(code == 0 and stdout == (text + "\n").encode("utf-8"),
              f"--prompt {prompt!r}: zero printed {stdout!r} (exit {code}, {stderr.strip()}), "
              f"transformers' pipeline {text!r}")
        code, stdout, _ = zero(binary, "--model", folder, "--prompt_ids",
                               ",".join(map(str, prompt_ids)), "--max_new_tokens",
                               str(max_new_tokens))
        check(code == 0 and stdout.decode().strip() == ",".join(map(str, sequence)),
              f"--prompt_ids of {prompt!r}: zero printed {stdout!r}, generate {sequence}")
    compared = len(PROMPTS + searched) - len(ties)
    check(len(ties) <= 2,
          f"{len(ties)} prompts are near ties ({ties}): too few left to compare")
    print(f"{compared} prompts compared; {stopped} stopped at eos before max_new_tokens")
    first = next(prompt for prompt, _ in PROMPTS if prompt not in ties)

    # config.json's eos_token_id as a list: the pipeline stops at whichever comes first.
    _, _, sequence, _ = reference(folder, first, 20)
    listed = os.path.join(work, "eos_list")
    shutil.copytree(folder, listed)
    new_tokens = sequence[len(tokenizer(first).input_ids):]
    check(len(new_tokens) >= 4, "the first prompt's continuation is too short for the eos list")
    with open(os.path.join(listed, "config.json")) as stream:
        config = json.load(stream)
    config["eos_token_id"] = [tokenizer.convert_tokens_to_ids("<|sep|>"), new_tokens[3]]
    with open(os.path.join(listed, "config.json"), "w") as stream:
        json.dump(config, stream)
    os.remove(os.path.join(listed, "generation_config.json"))  # from config.json, as transformers
    text, _, listed_sequence, _ = reference(listed, first, 20)
    check(len(listed_sequence) < len(sequence), "the eos list did not stop transformers early")
    code, stdout, _ = zero(binary, "--model_name_or_path", listed, "--prompt", first,
                           "--max_new_tokens", "20")
    check(code == 0 and stdout == (text + "\n").encode("utf-8"),
          f"eos list: zero printed {stdout!r}, transformers {text!r}")

    # Sampling: reproducible by seed; top-k 1 is greedy, as in transformers.
    greedy = zero(binary, "--model_name_or_path", folder, "--prompt", "To be", "--max_new_tokens",
                  "12")[1]
    sampled = zero(binary, "--model_name_or_path", folder, "--prompt", "To be", "--do_sample",
                   "--seed", "3", "--max_new_tokens", "12")
    check(sampled[0] == 0 and sampled[1] == zero(binary, "--model_name_or_path", folder, "--prompt",
                                                   "To be", "--do_sample", "--seed", "3",
                                                   "--max_new_tokens", "12")[1],
          "--do_sample with one seed printed two texts")
    check(zero(binary, "--model_name_or_path", folder, "--prompt", "To be", "--do_sample",
               "--top_k", "1", "--max_new_tokens", "12")[1] == greedy,
          "--do_sample --top_k 1 is not greedy")
    code, stdout, stderr = zero(binary, "--model_name_or_path", folder, "--prompt", "To be",
                                "--top_k", "5", "--max_new_tokens", "12")
    check(code == 0 and stdout == greedy and "only used with --do_sample" in stderr,
          f"--top_k without --do_sample: expected greedy and a warning, got {stderr.strip()}")

    # A folder without a tokenizer: --prompt is refused by name, --tokenizer_name gives one.
    bare = os.path.join(work, "bare")
    os.makedirs(bare)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(folder, name), bare)
    expect_refused(binary, ["--model_name_or_path", bare, "--prompt", "To be"],
                   "--prompt needs a tokenizer")
    check(zero(binary, "--model_name_or_path", bare, "--tokenizer_name", folder, "--prompt",
               "To be", "--max_new_tokens", "12")[1] == greedy, "--tokenizer_name not used")
    expect_refused(binary, ["--model_name_or_path", folder, "--prompt", "a", "--prompt_ids", "1"],
                   "give one of --prompt")
    expect_refused(binary, ["--model_name_or_path", folder], "give one of --prompt")
    expect_refused(binary, ["--prompt", "a"], "--model_name_or_path")
    expect_refused(binary, ["--model_name_or_path", folder, "--prompt_ids", f"1,{len(tokenizer)}"],
                   f"token id {len(tokenizer)} is outside the model's vocabulary")
    expect_refused(binary, ["--model_name_or_path", folder, "--prompt", "a", "--do_sample",
                            "--temperature", "0"], "--temperature")
    expect_refused(binary, ["--model_name_or_path", folder, "--prompt", "a", "--top_k", "-1"],
                   "--top_k")
    expect_refused(binary, ["--model_name_or_path", folder, "--prompt", "a", "--max_new_tokens",
                            "0"], "--max_new_tokens is 0, expected > 0")
    expect_refused(binary, ["--model_name_or_path", bare, "--tokenizer_name",
                            os.path.join(work, "none"), "--prompt", "a"], "--tokenizer_name")
    expect_refused(binary, ["--model_name_or_path", os.path.join(work, "none"), "--prompt", "a"],
                   "--model_name_or_path")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("generate text golden ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
