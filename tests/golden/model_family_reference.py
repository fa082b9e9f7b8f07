"""Tiny Llama-family models built by transformers, for tests/golden/model_family_golden_test.cc.

Usage: model_family_reference.py OUT_DIR
For each case writes OUT_DIR/<case>/config.json (the config's save_pretrained) and
OUT_DIR/<case>/reference.json: DeepSpeed's model_to_params(model) (deepspeed.runtime.zero.stage3:
total parameters with shared ones once, and the largest layer, the most parameters one module holds
directly, what estimate_zero3_model_states_mem_needs_all_live uses) and every parameter's name and
shape (named_parameters: a tied lm_head is the embedding's, listed once). Exits 3 when torch,
transformers or deepspeed is not importable.
"""
import contextlib
import io
import json
import os
import sys

try:
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import torch
        import transformers
        from deepspeed.runtime.zero.stage3 import model_to_params
except Exception as error:  # noqa: BLE001 - any import failure means "skip"
    print(f"torch, transformers or deepspeed not importable: {error}", file=sys.stderr)
    sys.exit(3)

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64}

# Grouped-query attention, llama3 rope scaling, untied and tied heads, Llama's attention and MLP
# biases, a head_dim that is not hidden_size / heads, Mistral's window, Qwen2's q/k/v biases.
CASES = {
    "llama_gqa_llama3_untied": (transformers.LlamaConfig, dict(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128,
        rope_theta=500000.0, rope_scaling=LLAMA3_SCALING, tie_word_embeddings=False)),
    "llama_biases_head_dim_tied": (transformers.LlamaConfig, dict(
        vocab_size=300, hidden_size=64, intermediate_size=80, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4, head_dim=32, attention_bias=True,
        mlp_bias=True, max_position_embeddings=64, tie_word_embeddings=True)),
    "mistral_window": (transformers.MistralConfig, dict(
        vocab_size=260, hidden_size=48, intermediate_size=112, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, sliding_window=64,
        max_position_embeddings=256, tie_word_embeddings=False)),
    "qwen2_tied": (transformers.Qwen2Config, dict(
        vocab_size=320, hidden_size=56, intermediate_size=72, num_hidden_layers=2,
        num_attention_heads=7, num_key_value_heads=1, max_position_embeddings=128,
        tie_word_embeddings=True)),
    "qwen2_untied": (transformers.Qwen2Config, dict(
        vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        tie_word_embeddings=False)),
}


def main():
    out_dir = sys.argv[1]
    torch.manual_seed(0)
    for name, (config_class, arguments) in CASES.items():
        config = config_class(**arguments)
        model = transformers.AutoModelForCausalLM.from_config(config)
        total, largest = model_to_params(model)
        folder = os.path.join(out_dir, name)
        config.save_pretrained(folder)
        tensors = {key: list(value.shape) for key, value in model.named_parameters()}
        with open(os.path.join(folder, "reference.json"), "w") as out:
            json.dump({"total": total, "largest": largest, "tensors": tensors}, out)
    print(f"{len(CASES)} models written by transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
