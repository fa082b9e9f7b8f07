#!/usr/bin/env python3
"""Writes the in-tree seed corpora of the fuzz harnesses (corpus/<harness>/): small valid inputs
of each reader, made here so they are our own test inputs. Run from anywhere; rewrites the files
it owns and leaves other files (minimised findings added by hand) alone."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FNV_PRIME = 0x100000001B3
FNV_SEED = 0xCBF29CE484222325


def put(harness, name, data):
    folder = os.path.join(HERE, "corpus", harness)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] -> the file's bytes."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def checksum(data):
    value, i = FNV_SEED, 0
    while i + 8 <= len(data):
        value = ((value ^ struct.unpack_from("<Q", data, i)[0]) * FNV_PRIME) % (1 << 64)
        i += 8
    for byte in data[i:]:
        value = ((value ^ byte) * FNV_PRIME) % (1 << 64)
    return value


def floats(values):
    return struct.pack("<%df" % len(values), *values)


def safetensors_seeds():
    put("safetensors", "mixed", safetensors([
        ("wte", "F32", [2, 3], floats([0.5, -1, 2, 3, 4, 5])),
        ("ln.bias", "BF16", [4], struct.pack("<4H", 0x3F80, 0xBF80, 0x0000, 0x4000)),
        ("h.0.half", "F16", [2], struct.pack("<2H", 0x3C00, 0xC000)),
        ("steps", "I64", [1], struct.pack("<q", 7)),
        ("ids", "I32", [3], struct.pack("<3i", 1, 2, 3)),
        ("scalar", "F64", [], struct.pack("<d", 1.5)),
        ("empty", "F32", [0, 4], b""),
    ], {"format": "pt"}))
    put("safetensors", "header_only", safetensors([]))


def ds_config_seeds():
    put("ds_config", "stage2_auto", json.dumps({
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": [0.9, 0.999], "eps": 1e-8,
                                                  "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": "auto",
                                                          "warmup_num_steps": "auto",
                                                          "total_num_steps": "auto"}},
        "zero_optimization": {"stage": 2, "overlap_comm": True, "contiguous_gradients": True,
                              "reduce_bucket_size": "auto", "allgather_bucket_size": 5e8}}, indent=1))
    put("ds_config", "stage3_nvme", json.dumps({
        "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
        "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 16, "hysteresis": 2},
        "optimizer": {"type": "Adam", "params": {"lr": 3e-4}},
        "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto",
                              "offload_param": {"device": "nvme", "nvme_path": "/tmp/nvme",
                                                "pin_memory": True, "buffer_count": 5},
                              "offload_optimizer": {"device": "cpu", "pin_memory": True}},
        "aio": {"block_size": 1048576, "queue_depth": 8, "single_submit": False},
        "csv_monitor": {"enabled": True, "output_path": "out", "job_name": "fuzz"},
        "steps_per_print": 10, "wall_clock_breakdown": False}, indent=1))


def checkpoint_seeds():
    units = [("h.0.w", 6), ("h.0.b", 2)]
    states = ["exp_avg", "exp_avg_sq"]
    tensors, metadata, ranges = [], {}, {}
    for name, count in units:
        for state in ["params"] + states:
            tensors.append((name + "/" + state, "F32", [count], floats([0.25 * i for i in range(count)])))
        metadata["range." + name] = "0:%d" % count
        ranges[name] = [0, count]
    shard = safetensors(tensors, metadata)
    index = {
        "format": "zero-checkpoint", "version": 1, "world_size": 1, "stage": 1,
        "param_dtype": "bf16", "master_dtype": "fp32", "optimizer": "AdamW",
        "optimizer_states": states,
        "training_state": {"global_steps": 3, "skipped_steps": 0, "optimizer_steps": 3,
                           "scheduler_last_batch_iteration": 2,
                           "loss_scaler": {"scale": 1.0, "iteration": 3,
                                           "last_overflow_iteration": -1, "hysteresis": 2}},
        "units": [{"name": n, "num_elements": c} for n, c in units],
        "files": [{"name": "zero_shard-00000-of-00001.safetensors", "rank": 0,
                   "size_bytes": len(shard), "checksum": "%016x" % checksum(shard),
                   "ranges": ranges}]}
    put("checkpoint", "complete", json.dumps(index, indent=1).encode() + b"\0" + shard)
    put("checkpoint", "index_only", json.dumps(index, indent=1))


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def tokenizer_seeds():
    mapping = bytes_to_unicode()
    vocab = {mapping[b]: b for b in range(256)}
    merges = []
    for pair in [("h", "e"), ("l", "l"), ("he", "ll"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or")]:
        merges.append(" ".join(pair))
        vocab["".join(pair)] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    text = "hello world, hello\n<|endoftext|> héllo 123 it's"
    merges_text = "#version: 0.2\n" + "\n".join(merges) + "\n"
    put("tokenizer_files", "small", json.dumps(vocab, ensure_ascii=False) + "\0" + merges_text + "\0" + text)
    tokenizer_json = {
        "version": "1.0",
        "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "vocab": vocab, "merges": merges}}
    put("tokenizer_json", "small", json.dumps(tokenizer_json, ensure_ascii=False) + "\0" + text)


def data_seeds():
    put("text_data", "lines", "First Citizen:\nBefore we proceed any further, hear me speak.\r\n\nAll:\rSpeak, speak.\n")
    put("text_data", "jsonl", '{"text": "one"}\n\n{"text": "two\\nlines", "meta": 1}\n{"text": ""}\n')
    put("labelled_data", "csv", 'sentence1,sentence2,label\n"A, quoted ""one""",b,pos\nplain,"multi\nline",neg\n\n')
    put("labelled_data", "jsonl", '{"sentence1": "a", "sentence2": "b", "label": 1}\n'
                                  '{"sentence1": "c", "sentence2": "d", "label": 0}\n')


def arrow_stream_seeds():
    """The Arrow streams of tests/datasets/fixtures (datasets' cache files and the refused ones,
    written by its make_fixtures.py), named by their path there."""
    fixtures = os.path.join(HERE, "..", "datasets", "fixtures")
    for root, _, files in os.walk(fixtures):
        for name in sorted(files):
            if name.endswith(".arrow"):
                relative = os.path.relpath(os.path.join(root, name), fixtures).split(os.sep)
                kept = [part for part in relative if part not in ("cache", "tiny_corpus", "0.0.0")
                        and not (len(part) == 16 and all(c in "0123456789abcdef" for c in part))]
                with open(os.path.join(root, name), "rb") as f:
                    put("arrow_stream", "_".join(kept), f.read())


def model_config_seeds():
    put("model_config", "gpt2", json.dumps({
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "embd_pdrop": 0.1, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12,
        "n_positions": 1024, "resid_pdrop": 0.1, "tie_word_embeddings": True, "vocab_size": 50257},
        indent=2))
    put("model_config", "tiny", '{"n_embd": 8, "n_head": 2, "n_layer": 1, "n_positions": 16, "vocab_size": 300}')
    put("model_config", "llama3", json.dumps({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 128,
        "vocab_size": 300, "rope_theta": 500000.0, "tie_word_embeddings": False,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        "bos_token_id": 1, "eos_token_id": [2, 3]}, indent=2))
    put("model_config", "qwen2", json.dumps({
        "model_type": "qwen2", "hidden_size": 56, "intermediate_size": 72, "num_hidden_layers": 2,
        "num_attention_heads": 7, "num_key_value_heads": 1, "vocab_size": 320,
        "use_sliding_window": False, "sliding_window": 4096, "tie_word_embeddings": True,
        "bos_token_id": None, "eos_token_id": 5}, indent=2))


def tcp_store_seeds():
    def string(text):
        return struct.pack("<Q", len(text)) + text

    hello = b"\x00" + struct.pack("<I", 0x3C85F7CE)
    ping = b"\x0d" + struct.pack("<I", 42)
    # PyTorch 2 codes: SET 1, GET 3, ADD 4, CHECK 5, WAIT 6, GET_NUM_KEYS 7.
    session = hello + ping + b"\x01" + string(b"k") + string(b"v") + b"\x03" + string(b"k") + \
        b"\x04" + string(b"n") + struct.pack("<q", 5) + b"\x04" + string(b"n") + struct.pack("<q", -2) + \
        b"\x05" + struct.pack("<Q", 2) + string(b"k") + string(b"n") + \
        b"\x06" + struct.pack("<Q", 1) + string(b"k") + b"\x07"
    put("tcp_store", "session", session)
    put("tcp_store", "wait_missing", hello + b"\x06" + struct.pack("<Q", 1) + string(b"absent"))


if __name__ == "__main__":
    safetensors_seeds()
    ds_config_seeds()
    checkpoint_seeds()
    tokenizer_seeds()
    data_seeds()
    arrow_stream_seeds()
    model_config_seeds()
    tcp_store_seeds()
