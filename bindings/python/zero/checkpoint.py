"""Resumable ZeRO checkpoints: `zero checkpoint info` and `zero checkpoint consolidate`."""

import os

from . import _zero


def info(path, checksums=True):
    """The checkpoint `path` names (a checkpoint-N folder, or an output_dir: its `latest`, else
    its newest), validated: world size, stage, dtypes, optimizer, step, units and shard files.
    checksums=False checks sizes and headers only. Raises zero.Error naming what is wrong."""
    return _zero.checkpoint_info(os.fspath(path), checksums)


def consolidate(path, out):
    """Writes out/model.safetensors + config.json (a Hugging Face GPT-2, fp32 master weights) from
    the checkpoint's shards, one unit at a time, as DeepSpeed's zero_to_fp32.py."""
    return _zero.checkpoint_consolidate(os.fspath(path), os.fspath(out))
