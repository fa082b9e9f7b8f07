#!/usr/bin/env python3
"""The final model's dtype follows Hugging Face's Trainer, and transformers loads it.

Trainer under DeepSpeed with bf16/fp16 saves the module's 16-bit weights (DeepSpeed casts the
module; accelerate's get_state_dict: the module's state_dict at stages 0-2, the consolidated 16-bit
state dict at stage 3 with stage3_gather_16bit_weights_on_model_save) and save_pretrained writes
torch_dtype from them; --bf16 without DeepSpeed is autocast over fp32 parameters: fp32. For GPT-2
and a Llama config trained 2 steps from scratch with a checkpoint at the last step:
- DeepSpeed bf16 at stage 2, fp16 at stage 1, bf16 at stage 3 with the gather flag: every tensor in
  that dtype, config.json's torch_dtype naming it, each value torch's rounding (.to(dtype)) of
  the checkpoint's fp32 tensor of the same step (zero's fp32 masters); the checkpoint stays fp32;
- --bf16 without DeepSpeed, and DeepSpeed bf16 at stage 3 without the gather flag: fp32 equal to
  the checkpoint's;
- transformers' AutoModelForCausalLM.from_pretrained(torch_dtype="auto") loads each final folder in
  its dtype and (but fp16: torch 1.13's CPU has no fp16 LayerNorm) its logits equal those of the
  checkpoint's fp32 model rounded the same way;
- a text classifier under DeepSpeed bf16 is saved in bf16 too.
Without torch, safetensors or transformers it prints "skipped:" and exits 77.
Usage: final_dtype_test.py ZERO SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import sys

zero, source, work = sys.argv[1:4]
sys.path.insert(0, os.path.join(source, "tests", "classify"))
from cli_checks import check, golden_modules, run, status  # noqa: E402

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300,
         "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
         "tie_word_embeddings": False}
CASES = {  # name: (deepspeed config or None, precision flag, expected dtype)
    "stage2_bf16": ({"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}}, "--bf16",
                    "bfloat16"),
    "stage1_fp16": ({"zero_optimization": {"stage": 1}, "fp16": {"enabled": "auto"}}, "--fp16",
                    "float16"),
    "stage3_gather": ({"zero_optimization": {"stage": 3,
                                             "stage3_gather_16bit_weights_on_model_save": True},
                       "bf16": {"enabled": "auto"}}, "--bf16", "bfloat16"),
    "stage3_no_gather": ({"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}},
                         "--bf16", "float32"),
    "plain_bf16": (None, "--bf16", "float32"),
}


def train(family, case, out):
    deepspeed, precision, _ = CASES[case]
    model = (["--config_name", f"{work}/llama"] if family == "llama" else
             ["--config_overrides", "n_layer=2,n_embd=32,n_head=2,n_positions=64"])
    flags = [precision]
    if deepspeed:
        path = f"{work}/{case}.json"
        with open(path, "w", encoding="utf-8") as stream:
            json.dump({"train_micro_batch_size_per_gpu": "auto",
                       "gradient_accumulation_steps": "auto", **deepspeed}, stream)
        flags += ["--deepspeed", path]
    log = run([zero, "train", *model, "--tokenizer_vocab_size", "300", "--train_file",
               os.path.join(source, "README.md"), "--do_train", "--block_size", "32",
               "--max_steps", "2", "--per_device_train_batch_size", "2", "--learning_rate",
               "1e-2", "--save_strategy", "steps", "--save_steps", "2", "--no_plot",
               "--output_dir", out, *flags])
    return log


def compare(torch, transformers, load_file, family, case):
    expected = CASES[case][2]
    out = f"{work}/{family}_{case}"
    log = train(family, case, out)
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[expected]
    check(f"{short} weights)" in log, f"{family} {case}: the saved line does not say {short}")
    with open(f"{out}/config.json", encoding="utf-8") as stream:
        torch_dtype = json.load(stream).get("torch_dtype")
    check(torch_dtype == expected, f"{family} {case}: torch_dtype {torch_dtype}, not {expected}")
    final = load_file(f"{out}/model.safetensors")
    master = load_file(f"{out}/checkpoint-2/model.safetensors")
    dtype = getattr(torch, expected)
    check({t.dtype for t in master.values()} == {torch.float32},
          f"{family} {case}: the checkpoint's model is not fp32")
    check({t.dtype for t in final.values()} == {dtype},
          f"{family} {case}: tensors {sorted({str(t.dtype) for t in final.values()})}")
    differing = [name for name, tensor in final.items()
                 if not torch.equal(tensor, master[name].to(dtype))]
    check(not differing, f"{family} {case}: not the {expected} rounding of the fp32 masters: "
          f"{differing[:3]}")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(out, torch_dtype="auto").eval()
    check(loaded.dtype == dtype, f"{family} {case}: transformers loads {loaded.dtype}")
    # The checkpoint's fp32 file loaded into a model of this dtype (built as `loaded` is: Llama's
    # rotary inv_freq stays fp32, which .to(dtype) would round).
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        f"{out}/checkpoint-2", torch_dtype=dtype).eval()
    ids = torch.tensor([[5, 17, 42, 99, 7, 3]])
    if dtype != torch.float16:  # torch 1.13 has no fp16 LayerNorm on the CPU
        with torch.no_grad():
            ours, theirs = loaded(ids).logits, reference(ids).logits
        check(torch.isfinite(ours).all() and torch.equal(ours, theirs),
              f"{family} {case}: logits differ from the rounded checkpoint model's")
    print(f"{family} {case}: {expected} ({len(final)} tensors), loaded by transformers")


def classifier(load_file):
    data = f"{work}/classes.csv"
    with open(data, "w", encoding="utf-8") as stream:
        stream.write("text,label\n" + "".join(f'"the sea {i}",sea\n"a sword {i}",war\n'
                                              for i in range(8)))
    out = f"{work}/classifier"
    run([zero, "train", "--task", "text-classification", "--train_file", data,
         "--text_column_names", "text", "--max_seq_length", "8", "--config_overrides",
         "n_layer=1,n_embd=32,n_head=2,n_positions=16", "--tokenizer_vocab_size", "300",
         "--do_train", "--max_steps", "2", "--per_device_train_batch_size", "4", "--bf16",
         "--deepspeed", f"{work}/stage2_bf16.json", "--save_strategy", "no", "--no_plot",
         "--output_dir", out])
    with open(f"{out}/config.json", encoding="utf-8") as stream:
        config = json.load(stream)
    dtypes = {str(t.dtype) for t in load_file(f"{out}/model.safetensors").values()}
    check(config["torch_dtype"] == "bfloat16" and dtypes == {"torch.bfloat16"},
          f"classifier: torch_dtype {config['torch_dtype']}, tensors {dtypes}")


def main():
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(f"{work}/llama")
    with open(f"{work}/llama/config.json", "w", encoding="utf-8") as stream:
        json.dump(LLAMA, stream)
    torch, transformers = golden_modules()
    from safetensors.torch import load_file
    for family in ("gpt2", "llama"):
        for case in CASES:
            compare(torch, transformers, load_file, family, case)
    classifier(load_file)
    return status("final model dtype ok")


if __name__ == "__main__":
    sys.exit(main())
