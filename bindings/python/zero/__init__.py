"""zero from Python: the memory planner, the DeepSpeed config checker, GPT-2's tokenizer and the
trainer, in this process, over the same C++ as the `zero` command line (no logic of its own here:
keyword arguments become the command's flags, parsed by its flag table).

    import zero
    zero.estimate(model="gpt2-7b-config/", world_size=8, zero_stage=3)   # zero estimate --json
    zero.plan(model="gpt2", deepspeed="ds.json", world_size=4)            # zero train --dry_run
    zero.config.resolve("ds.json", per_device_train_batch_size=8)         # zero config
    ids = zero.Tokenizer.from_pretrained("gpt2").encode("Hello world")   # int32 array, no copy
    zero.train(train_dataset=["a text", ...], output_dir="out", do_train=True, max_steps=100,
               on_log=print)                                              # zero train

Errors: zero.Error and its subclasses, each also the built-in exception Python code expects:
InputError (a ValueError: bad arguments or data), ConfigError (an InputError: a DeepSpeed config
with errors), MissingFileError (an InputError and a FileNotFoundError), ArgumentTypeError (a
TypeError), RunError (a RuntimeError: a failure while running). Messages name the argument.
Log records go to the logger "zero" (logging); the trainer's lines to sys.stdout.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import logging
import numbers
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import _zero
from ._zero import (ArgumentTypeError, ConfigError, Error, InputError, MissingFileError, RunError,
                    TokenBatch, TokenBuffer, Tokenizer)


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
from ._flags import check_exists as _check_exists  # noqa: E402
from ._flags import check_paths as _check_paths  # noqa: E402
from ._flags import check_type as _check_type  # noqa: E402
from ._flags import check_types as _check_types  # noqa: E402
from ._flags import words as _words  # noqa: E402

__all__ = ["ArgumentTypeError", "ConfigError", "Error", "InputError", "MissingFileError",
           "RunError", "TokenBatch", "TokenBuffer", "Tokenizer", "checkpoint", "config",
           "estimate", "plan", "train"]
__version__ = "0.1.0"

_log = logging.getLogger("zero")


def _log_record(level, rank, world_size, message):
    """The library's log records (zero/core/logging.h) as records of the logger "zero", in the
    `zero` command's words ("[rank r/W] message"); rank and world_size also as record attributes.
    Unconfigured, Python prints warnings and errors on stderr and drops the rest."""
    _log.log(level, "[rank %d/%d] %s", rank, world_size, message,
             extra={"rank": rank, "world_size": world_size})


_zero.set_log_handler(_log_record)


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
            raise ArgumentTypeError(
                f"deepspeed: expected a path or a dict, got {type(self.config).__name__}")
        if self.path is not None:
            _check_exists("deepspeed", self.path)
        return self.path

    def __exit__(self, *exc):
        if self._temporary is not None:
            os.unlink(self._temporary.name)


def _positive_int(name, value):
    _check_type(name, value, "an int",
                lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool))
    if value < 1:
        raise InputError(f"{name}: must be at least 1, got {value}")
    return int(value)


def estimate(model: str | os.PathLike | None = None,
             deepspeed: str | os.PathLike | dict | None = None, world_size: int | None = None,
             **flags: Any) -> dict[str, Any]:
    """`zero estimate --json` as a dict: rank 0's memory plan on the hardware given, whether it
    fits, the largest micro-batch that fits and the configurations that fit, fastest first.
    "fits" is the one answer: each GPU (gpu_memory) and, when cpu_memory is given, the node's host
    memory and every phase of the run on the node; "fits_budget" says which budgets it checked.

    model: --model_name_or_path (a folder or Hub id from the local cache); deepspeed: a config path
    or dict; world_size: GPUs in all (--num_gpus_per_node x --num_nodes); every other keyword is
    one of `zero estimate`'s flags (gpu_memory="80GiB", cpu_memory="1TiB", zero_stage=3,
    params="7e9", ...)."""
    if world_size is not None:
        world_size = _positive_int("world_size", world_size)
        nodes = _positive_int("num_nodes", flags.get("num_nodes", 1))
        if "num_gpus_per_node" in flags:
            _positive_int("num_gpus_per_node", flags["num_gpus_per_node"])
        if world_size % nodes != 0:
            raise InputError(f"world_size {world_size} is not a multiple of num_nodes {nodes}")
        if "num_gpus_per_node" in flags and int(flags["num_gpus_per_node"]) * nodes != world_size:
            raise InputError(f"world_size {world_size} contradicts num_gpus_per_node "
                             f"{flags['num_gpus_per_node']} x num_nodes {nodes}")
        flags["num_gpus_per_node"] = world_size // nodes
    with _ConfigFile(deepspeed) as path:
        text, notes = _zero.estimate(
            _words({"model_name_or_path": model, "deepspeed": path, **flags}, "estimate"))
    for note in notes:
        _log.info("zero estimate: %s", note)
    return json.loads(text)


def plan(model: str | os.PathLike | None = None,
         deepspeed: str | os.PathLike | dict | None = None, world_size: int = 1,
         **flags: Any) -> list[dict[str, Any]]:
    """`zero train --dry_run`'s plans: one dict per rank of `world_size` (memory spaces with each
    category's peak, the ZeRO formula's model-state bytes, parameters, collectives). Every other
    keyword is one of `zero train`'s flags."""
    with _ConfigFile(deepspeed) as path:
        words = _words({"model_name_or_path": model, "deepspeed": path, "world_size": world_size,
                        **flags, "dry_run": True}, "train")
        return [json.loads(text) for text in _zero.plan(words)]


def _rows_of(name, value):
    """`value` as ("texts", list of str) or ("ids", what _zero.token_dataset reads): an object with
    the buffer protocol (a 2-D int32/int64 NumPy array) is ids; otherwise its first element
    decides (a str: texts; anything else: rows of token ids)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(
            f"{name}: expected a list of str (one example each) or rows of token ids, got "
            f"{type(value).__name__}")
    try:
        memoryview(value)
        return "ids", value
    except (TypeError, ValueError, BufferError):  # no buffer, or one of objects (ragged rows)
        pass
    rows = value if isinstance(value, (list, tuple)) else list(value)
    if len(rows) == 0:
        raise InputError(f"{name}: no examples")
    return ("texts" if isinstance(rows[0], str) else "ids"), rows


class _Datasets:
    """train_dataset / eval_dataset given from Python. A list of str (one example each) becomes a
    JSON Lines file ({"text": ...} per line) in a temporary folder for the call, given to the
    trainer as --train_file / --validation_file: the same reader, tokenizer and token cache as
    files. Each file's modification time is fixed, so the token cache (keyed by content, size and
    time, as Hugging Face datasets keys local files) finds the same texts again. Rows of token ids
    (a list of lists of int, of 1-D int32/int64 arrays, or a 2-D array) become a TokenDataset
    (zero/train/token_dataset.h: TrainingArguments::train_dataset / validation_dataset), each id
    copied once."""

    FLAGS = {"train_dataset": "train_file", "eval_dataset": "validation_file"}

    def __init__(self, datasets, flags):
        self.datasets = {name: value for name, value in datasets.items() if value is not None}
        for name in self.datasets:
            if flags.get(self.FLAGS[name]) is not None:
                raise InputError(f"{name}: give {name} or {self.FLAGS[name]}, not both")
        self.folder = None
        self.ids = {}
        self.files = {}

    def __enter__(self):
        texts = {}
        for name, value in self.datasets.items():
            kind, rows = _rows_of(name, value)
            if kind == "texts":
                texts[name] = rows
            else:
                self.ids[name] = _zero.token_dataset(name, rows)
        if not texts:
            return self
        self.folder = tempfile.TemporaryDirectory(prefix="zero-datasets-")
        try:
            self.files = {self.FLAGS[name]: self._write(name, rows)
                          for name, rows in texts.items()}
            return self
        except BaseException:
            self.folder.cleanup()
            raise

    def _write(self, name, texts):
        """`texts` as a JSON Lines file in the folder; returns its path."""
        path = os.path.join(self.folder.name, f"{name}.jsonl")
        count = 0
        with open(path, "w", encoding="utf-8") as out:
            for index, text in enumerate(texts):
                if not isinstance(text, str):
                    raise ArgumentTypeError(
                        f"{name}[{index}]: expected a str, got {type(text).__name__}")
                out.write(json.dumps({"text": text}) + "\n")
                count += 1
        if count == 0:
            raise InputError(f"{name}: no examples")
        os.utime(path, ns=(_DATASET_TIME_NS, _DATASET_TIME_NS))
        return path

    def __exit__(self, *exc):
        if self.folder is not None:
            self.folder.cleanup()


_DATASET_TIME_NS = 946684800 * 10**9  # 2000-01-01: a fixed time for the datasets' files


def _stdout_write(text):
    """Rank 0's log lines: onto sys.stdout as it is now (a notebook's), flushed per line."""
    sys.stdout.write(text)
    sys.stdout.flush()


def train(args: Sequence[str] | Mapping[str, Any] | None = None, /, *, verbose: bool = True,
          on_log: Callable[[dict[str, Any]], object] | None = None,
          train_dataset: Iterable[str] | Iterable[Sequence[int]] | Any | None = None,
          eval_dataset: Iterable[str] | Iterable[Sequence[int]] | Any | None = None,
          **flags: Any) -> dict[str, Any]:
    """Runs `zero train` in this process on every rank of the launch: one rank alone, every rank
    under mpirun, srun or torchrun (each rank's Python calls it). The GIL is released while it
    runs; Ctrl-C (SIGINT) stops it after the step with a checkpoint, as SIGTERM does (a second
    one ends the process). Returns the results: global_step, epoch, train_loss, eval_loss,
    log_history, preempted, ...

    Keyword arguments are `zero train`'s flags under Hugging Face's names (run_clm's and
    TrainingArguments': output_dir="out", do_train=True, max_steps=100, learning_rate=3e-4,
    deepspeed="ds.json" or a dict, ...), each checked against the flag's type; `args` may instead
    (or as well) be the words after `zero train` or a dict of flags.
    train_dataset / eval_dataset (in place of train_file / validation_file): the examples as a
    list of str, or pre-tokenized as rows of token ids (a list of lists of int, a list of 1-D
    int32/int64 arrays, or a 2-D int32/int64 array; NumPy is not needed). Rows are treated as
    run_clm treats a tokenized input_ids column: group_texts concatenates each 1000 rows and cuts
    block_size blocks (the remainder of each group dropped), so rows of exactly block_size are
    used as they are. Ids are used as given (no bos/eos added) with the tokenizer named by
    tokenizer_name or model_name_or_path; an id < 0 or >= the model's vocab_size raises
    InputError (a ValueError) naming the row and position, a wrong element type
    ArgumentTypeError (a TypeError) naming the argument.
    on_log(entry): called with each log entry as a dict (step, epoch, loss, learning_rate,
    grad_norm, eval_loss, ...: trainer_state.json's log_history keys) as it is logged, on every
    rank; an exception it raises ends the run and is raised here.
    verbose: rank 0's log lines on sys.stdout (False: none). The library's log records go to
    the logger "zero"."""
    if on_log is not None and not callable(on_log):
        raise ArgumentTypeError(f"on_log: expected a callable, got {type(on_log).__name__}")
    words = []
    if isinstance(args, dict):
        flags = {**args, **flags}
    elif isinstance(args, (list, tuple)) and all(isinstance(word, str) for word in args):
        words = list(args)
    elif args is not None:
        raise ArgumentTypeError("train: expected keyword arguments, a list of command-line words "
                                f"or a dict of flags, got {type(args).__name__}")
    _check_types("train", flags)
    _check_paths(flags)
    with _ConfigFile(flags.pop("deepspeed", None)) as deepspeed, \
            _Datasets({"train_dataset": train_dataset, "eval_dataset": eval_dataset},
                      flags) as datasets:
        words += _words({**flags, **datasets.files, "deepspeed": deepspeed}, "train")
        result = _zero.train(words, verbose, _stdout_write if verbose else None, on_log,
                             datasets.ids.get("train_dataset"), datasets.ids.get("eval_dataset"))
    result["plan"] = [json.loads(text) for text in result["plan"]]
    if "test_report" in result:
        result["test_report"] = json.loads(result["test_report"])
    return result
