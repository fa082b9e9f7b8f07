"""Llama-family weight files written and read by transformers, for llama_weights_golden_test.cc.

Usage:
  llama_weights_reference.py build OUT_DIR CONFIGS_DIR
      Tiny random models of each family (grouped-query attention, Qwen2's q/k/v biases, Llama's
      attention and MLP biases, tied and untied heads, vocabularies not a multiple of 128), every
      parameter moved off its initial constant, saved by save_pretrained as
      OUT_DIR/<case>/fp32 (one model.safetensors), OUT_DIR/<case>/bf16 (the model in bfloat16),
      OUT_DIR/<case>/sharded (fp32, max_shard_size 40KB: several shards, the embeddings larger
      than a shard) and in a Hub cache, OUT_DIR/hub/models--zero-test--<case>/snapshots/<hash>/
      (bfloat16, max_shard_size 16KB; refs/main names the hash). OUT_DIR/cases.json lists them
      with their dtype and shard size. For each config.json under CONFIGS_DIR (Llama-2-7B and the
      other real configs) OUT_DIR/index/<name>.<dtype>.json is the model.safetensors.index.json
      save_pretrained would write at its 5GB default (huggingface_hub's split over the model's
      state dict, built on the meta device; empty when one file holds all).
  llama_weights_reference.py check PAIRS_JSON
      PAIRS_JSON lists {"original", "saved", "dtype"}: each folder is loaded by
      AutoModelForCausalLM.from_pretrained(torch_dtype=dtype); the saved one must load with no
      missing, unexpected or mismatched tensor, as the same class, with every tensor of the state
      dict bitwise equal to the original's.
Exit code 3 when torch or transformers is not importable.
"""
import gc
import json
import os
import sys

try:
    import torch
    import transformers
    from huggingface_hub.serialization._base import split_state_dict_into_shards_factory
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from llama_family_cases import CASES, build_config
except Exception as error:  # noqa: BLE001 - any import failure means "skip"
    print(f"torch, transformers or huggingface_hub not importable: {error}", file=sys.stderr)
    sys.exit(3)

SHARDED_BYTES = 40_000
HUB_SHARD_BYTES = 16_000
HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def tiny_model(name):
    model = transformers.AutoModelForCausalLM.from_config(build_config(transformers, name))
    with torch.no_grad():  # norms and biases away from their constant initialisation
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    return model


def hub_index(config_path, bytes_per_value):
    """save_pretrained's index at its 5GB default, from a meta-device model of the config."""
    patched = []
    for cls in (torch.nn.Linear, torch.nn.Embedding):
        original = cls.__init__

        def on_meta(self, *args, _original=original, **kwargs):
            kwargs["device"] = "meta"
            _original(self, *args, **kwargs)
        cls.__init__ = on_meta
        patched.append((cls, original))
    try:
        config = transformers.AutoConfig.from_pretrained(config_path)
        model = transformers.AutoModelForCausalLM.from_config(config)
    finally:
        for cls, original in patched:
            cls.__init__ = original
    state_dict = model.state_dict()
    if config.tie_word_embeddings:  # save_pretrained drops the tied copy
        state_dict.pop("lm_head.weight", None)
    split = split_state_dict_into_shards_factory(
        state_dict, get_storage_size=lambda tensor: tensor.numel() * bytes_per_value,
        filename_pattern="model{suffix}.safetensors", max_shard_size="5GB")
    if not split.is_sharded:
        return ""
    index = {"metadata": split.metadata, "weight_map": split.tensor_to_filename}
    return json.dumps(index, indent=2, sort_keys=True) + "\n"


def build(out_dir, configs_dir):
    torch.manual_seed(0)
    cases = []
    for name in CASES:
        model = tiny_model(name)
        folder = os.path.join(out_dir, name)
        model.save_pretrained(os.path.join(folder, "fp32"), safe_serialization=True)
        model.save_pretrained(os.path.join(folder, "sharded"), safe_serialization=True,
                              max_shard_size=SHARDED_BYTES)
        model = model.to(torch.bfloat16)
        model.save_pretrained(os.path.join(folder, "bf16"), safe_serialization=True)
        repo = os.path.join(out_dir, "hub", "models--zero-test--" + name.replace("_", "-"))
        model.save_pretrained(os.path.join(repo, "snapshots", HUB_COMMIT),
                              safe_serialization=True, max_shard_size=HUB_SHARD_BYTES)
        os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
        with open(os.path.join(repo, "refs", "main"), "w") as ref:
            ref.write(HUB_COMMIT)
        cases.append({"case": name, "variants": [
            {"name": "fp32", "dtype": "float32", "max_shard_bytes": 0},
            {"name": "bf16", "dtype": "bfloat16", "max_shard_bytes": 0},
            {"name": "sharded", "dtype": "float32", "max_shard_bytes": SHARDED_BYTES},
            {"name": "hub", "hub_id": "zero-test/" + name.replace("_", "-"),
             "dtype": "bfloat16", "max_shard_bytes": HUB_SHARD_BYTES}]})
    os.makedirs(os.path.join(out_dir, "index"), exist_ok=True)
    configs = []
    for name in sorted(os.listdir(configs_dir)):
        for dtype, size in (("float32", 4), ("bfloat16", 2)):
            text = hub_index(os.path.join(configs_dir, name), size)
            with open(os.path.join(out_dir, "index", f"{name}.{dtype}.json"), "w") as out:
                out.write(text)
        configs.append(name)
    with open(os.path.join(out_dir, "cases.json"), "w") as out:
        json.dump({"cases": cases, "hub": os.path.join(out_dir, "hub"), "configs": configs}, out)
    print(f"{len(CASES)} models and {len(configs)} indexes by transformers "
          f"{transformers.__version__}")


def check(pairs_path):
    with open(pairs_path) as file:
        pairs = json.load(file)
    transformers.utils.logging.disable_progress_bar()
    # from_pretrained calls gc.collect() after each shard; with torch's and transformers' objects
    # frozen out of the collector's generations each call costs milliseconds, not 0.1 s.
    gc.freeze()
    failures = []
    originals = {}
    for pair in pairs:
        dtype = getattr(torch, pair["dtype"])
        key = (pair["original"], pair["dtype"])
        if key not in originals:  # one at a time: loads gc.collect() per shard over what lives
            originals = {key: transformers.AutoModelForCausalLM.from_pretrained(
                pair["original"], torch_dtype=dtype)}
        original = originals[key]
        try:
            saved, info = transformers.AutoModelForCausalLM.from_pretrained(
                pair["saved"], torch_dtype=dtype, output_loading_info=True)
        except Exception as error:  # noqa: BLE001 - reported with the folder
            failures.append(f"{pair['saved']}: transformers cannot load it: {error}")
            continue
        problems = [f"{key}: {value}" for key, value in info.items() if value]
        if type(saved) is not type(original):
            problems.append(f"class {type(saved).__name__}, expected {type(original).__name__}")
        expected, actual = original.state_dict(), saved.state_dict()
        if list(expected) != list(actual):
            problems.append(f"state dict keys {sorted(actual)} != {sorted(expected)}")
        for key, tensor in expected.items():
            other = actual.get(key)
            if other is None or other.dtype != tensor.dtype or other.shape != tensor.shape:
                problems.append(f"{key}: {None if other is None else (other.dtype, other.shape)}")
            elif not torch.equal(other.view(torch.int16 if tensor.element_size() == 2
                                            else torch.int32),
                                 tensor.view(torch.int16 if tensor.element_size() == 2
                                             else torch.int32)):
                problems.append(f"{key}: values differ")
        del saved
        if problems:
            failures.append(f"{pair['saved']} against {pair['original']}: " + "; ".join(problems))
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{len(pairs) - len(failures)} of {len(pairs)} saved folders loaded by transformers "
          "equal their originals bitwise")
    sys.exit(1 if failures else 0)


def main():
    if sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")


if __name__ == "__main__":
    main()
