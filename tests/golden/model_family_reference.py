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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_family_cases import CASES, build_config  # noqa: E402


def main():
    out_dir = sys.argv[1]
    torch.manual_seed(0)
    for name in CASES:
        config = build_config(transformers, name)
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
