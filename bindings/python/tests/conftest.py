"""Fixtures of the Python module's tests: the module (build/bindings/python on PYTHONPATH, or an
installed `zero`), the `zero` CLI beside it (for same-output checks), a tiny corpus and trained
tiny model, a tokenizer trained on the repository's own text, and ../shared/data (the GPT-2 BPE
files) where present."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import zero

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[3]


def shared_data():
    path = os.environ.get("ZERO_SHARED_DATA")
    return pathlib.Path(path) if path else SOURCE_DIR.parent / "shared" / "data"


def require_shared(relative):
    path = shared_data() / relative
    if not path.exists():
        pytest.skip(f"shared data {path} not present")
    return path


@pytest.fixture(scope="session")
def cli():
    """The `zero` CLI of the same build: $ZERO_CLI, else build/tools/zero."""
    path = pathlib.Path(os.environ.get("ZERO_CLI", SOURCE_DIR / "build" / "tools" / "zero"))
    if not path.exists():
        pytest.skip(f"the zero CLI {path} is not built (set ZERO_CLI)")
    return path


def run_cli(cli, *words, check=True):
    return subprocess.run([str(cli), *map(str, words)], capture_output=True, text=True,
                          check=check)


@pytest.fixture(scope="session")
def gpt2_dir():
    return require_shared("gpt2")


def repository_markdown():
    """Text every checkout has: docs/*.md and the README."""
    return sorted((SOURCE_DIR / "docs").glob("*.md")) + [SOURCE_DIR / "README.md"]


@pytest.fixture(scope="session")
def repository_lines():
    """The repository's Markdown, line by line (about 4,000 lines, 360 kB): English prose, code,
    tables and a few non-ASCII characters, without the shared data folder."""
    lines = []
    for path in repository_markdown():
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


@pytest.fixture(scope="session")
def trained_tokenizer_dir(cli, tmp_path_factory):
    """A byte-level BPE of 2,000 tokens that `zero tokenizer train` learns from the repository's
    Markdown here (0.2 s): the tokenizer tests that do not need GPT-2's own ids run on it where
    the shared data folder is absent (CI)."""
    folder = tmp_path_factory.mktemp("trained_tokenizer")
    run_cli(cli, "tokenizer", "train", "--vocab_size", 2000, "--output", folder,
            *repository_markdown())
    return folder


# A corpus made here: no shared data needed for training.
WORDS = ("the quick brown fox jumps over a lazy dog while seven wise owls sing about rivers "
         "mountains and the slow turning of old wooden wheels in the morning light").split()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    lines = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12)) for i in range(400)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tiny_train_flags(corpus, output_dir, **extra):
    """A GPT-2 of one layer, width 32, its own 300-token BPE, a few steps of 2 x 16 tokens."""
    flags = {
        "train_file": corpus,
        "config_overrides": "n_layer=1,n_embd=32,n_head=2,n_positions=32",
        "tokenizer_vocab_size": 300,
        "block_size": 16,
        "do_train": True,
        "do_eval": True,
        "per_device_train_batch_size": 2,
        "per_device_eval_batch_size": 2,
        "max_steps": 4,
        "logging_steps": 1,
        "save_steps": 4,
        "learning_rate": 1e-3,
        "seed": 7,
        "output_dir": output_dir,
        "overwrite_output_dir": True,
    }
    flags.update(extra)
    return flags


@pytest.fixture(scope="session")
def trained(corpus, tmp_path_factory):
    """A tiny model trained once by zero.train at one rank: (output_dir, result)."""
    output_dir = tmp_path_factory.mktemp("trained") / "out"
    result = zero.train(tiny_train_flags(corpus, output_dir), verbose=False)
    return output_dir, result


def mpirun():
    """mpirun with the flags the C++ mpi tests get (cmake/ZeroTesting.cmake), or None."""
    path = shutil.which("mpirun")
    if path is None:
        return None
    return [path, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"]


MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl": "self,vader,tcp",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}


def python_env():
    """The environment a child Python needs to import the same `zero`."""
    env = dict(os.environ)
    package_root = str(pathlib.Path(zero.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


PYTHON = sys.executable
