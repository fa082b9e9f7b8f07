"""zero from Python: the memory planner, the DeepSpeed config checker, GPT-2's tokenizer and the
trainer, in this process, over the same C++ as the `zero` command line (no logic of its own here:
keyword arguments become the command's flags, parsed by its flag table).

    import zero
    zero.estimate(model="gpt2-7b-config/", world_size=8, zero_stage=3)   # zero estimate --json
    zero.plan(model="gpt2", deepspeed="ds.json", world_size=4)            # zero train --dry_run
    zero.config.resolve("ds.json", per_device_train_batch_size=8)         # zero config
    ids = zero.Tokenizer.from_pretrained("gpt2").encode("Hello world")   # int32 array, no copy
    zero.train({"train_file": "corpus.txt", "output_dir": "out", ...})    # zero train

Errors are zero.Error, zero.ConfigError (a DeepSpeed config with errors) and zero.InputError (bad
input: flags, files), with the C++ messages unchanged.
"""

import atexit
import ctypes
import json
import logging
import os
import tempfile

from . import _zero
from ._zero import ConfigError, Error, InputError, TokenBatch, TokenBuffer, Tokenizer


def _load_mpi_globally():
    """Makes the libmpi the extension linked visible to libraries loaded later (RTLD_GLOBAL), as
    mpi4py does: Open MPI's plugins (mca_*.so), loaded by MPI_Init, resolve libmpi's symbols from
    the global scope, which a Python extension's dependencies are not in."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "/libmpi.so" in line}
    except OSError:
        return
    for path in paths:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 4))
        except OSError:
            pass


_load_mpi_globally()
atexit.register(_zero.finalize)

from . import checkpoint, config  # noqa: E402  (after the extension is set up)
from ._flags import words as _words  # noqa: E402

__all__ = ["ConfigError", "Error", "InputError", "TokenBatch", "TokenBuffer", "Tokenizer",
           "checkpoint", "config", "estimate", "plan", "train"]
__version__ = "0.1.0"

_log = logging.getLogger("zero")


class _ConfigFile:
    """A DeepSpeed config given as a path (used as it is) or a dict (written to a temporary file
    for the call)."""

    def __init__(self, config):
        self.config = config
        self.path = None
        self._temporary = None

    def __enter__(self):
        if self.config is None or isinstance(self.config, (str, os.PathLike)):
            self.path = None if self.config is None else os.fspath(self.config)
        elif isinstance(self.config, dict):
            self._temporary = tempfile.NamedTemporaryFile(
                "w", suffix=".json", prefix="zero-deepspeed-", delete=False)
            with self._temporary as stream:
                json.dump(self.config, stream)
            self.path = self._temporary.name
        else:
            raise TypeError(f"deepspeed: expected a path or a dict, got {type(self.config).__name__}")
        return self.path

    def __exit__(self, *exc):
        if self._temporary is not None:
            os.unlink(self._temporary.name)


def estimate(model=None, deepspeed=None, world_size=None, **flags):
    """`zero estimate --json` as a dict: rank 0's memory plan on the hardware given, whether it
    fits, the largest micro-batch that fits and the configurations that fit, fastest first.

    model: --model_name_or_path (a folder or Hub id from the local cache); deepspeed: a config path
    or dict; world_size: GPUs in all (--num_gpus_per_node x --num_nodes); every other keyword is
    one of `zero estimate`'s flags (gpu_memory="80GiB", zero_stage=3, params="7e9", ...)."""
    if world_size is not None:
        nodes = int(flags.get("num_nodes", 1))
        if world_size % nodes != 0:
            raise InputError(f"world_size {world_size} is not a multiple of num_nodes {nodes}")
        if "num_gpus_per_node" in flags and int(flags["num_gpus_per_node"]) * nodes != world_size:
            raise InputError(f"world_size {world_size} contradicts num_gpus_per_node "
                             f"{flags['num_gpus_per_node']} x num_nodes {nodes}")
        flags["num_gpus_per_node"] = world_size // nodes
    with _ConfigFile(deepspeed) as path:
        text, notes = _zero.estimate(
            _words({"model_name_or_path": model, "deepspeed": path, **flags}))
    for note in notes:
        _log.info("zero estimate: %s", note)
    return json.loads(text)


def plan(model=None, deepspeed=None, world_size=1, **flags):
    """`zero train --dry_run`'s plans: one dict per rank of `world_size` (memory spaces with each
    category's peak, the ZeRO formula's model-state bytes, parameters, collectives). Every other
    keyword is one of `zero train`'s flags."""
    with _ConfigFile(deepspeed) as path:
        words = _words({"model_name_or_path": model, "deepspeed": path, "world_size": world_size,
                        **flags, "dry_run": True})
        return [json.loads(text) for text in _zero.plan(words)]


def train(args, verbose=True):
    """Runs `zero train` in this process with `args` (the words after `zero train`, or a dict of
    its flags) on every rank of the launch: one rank alone, every rank under mpirun, srun or
    torchrun (each rank's Python calls it). The GIL is released while it runs; Ctrl-C (SIGINT)
    stops it after the step with a checkpoint, as SIGTERM does (a second one ends the process).
    Returns the results: global_step, epoch, train_loss, eval_loss, log_history, preempted, ...
    verbose=False: no log lines or progress bars."""
    if isinstance(args, dict):
        words = _words(args)
    elif isinstance(args, (list, tuple)) and all(isinstance(word, str) for word in args):
        words = list(args)
    else:
        raise TypeError("train: expected a list of command-line words or a dict of flags")
    result = _zero.train(words, verbose)
    result["plan"] = [json.loads(text) for text in result["plan"]]
    if "test_report" in result:
        result["test_report"] = json.loads(result["test_report"])
    return result
