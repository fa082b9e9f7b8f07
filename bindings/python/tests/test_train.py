"""zero.train in this process (one rank; two under mpirun), Ctrl-C, and the checkpoints it writes
read back by zero.checkpoint.info/consolidate."""

import json
import math
import os
import re
import signal
import subprocess
import time

import pytest

import zero
from conftest import MPI_ENV, PYTHON, mpirun, python_env, run_cli, tiny_train_flags


def test_train_at_one_rank_returns_the_results(trained):
    output_dir, result = trained
    assert result["global_step"] == 4
    assert math.isfinite(result["train_loss"]) and math.isfinite(result["eval_loss"])
    assert not result["preempted"]
    losses = [entry["loss"] for entry in result["log_history"] if "loss" in entry]
    assert len(losses) == 4
    state = json.loads((output_dir / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert (output_dir / "model.safetensors").exists()


def test_train_takes_command_line_words(corpus, tmp_path):
    flags = tiny_train_flags(corpus, tmp_path / "out", max_steps=2, do_eval=False)
    words = [word for name, value in flags.items() for word in (f"--{name}", str(value))]
    result = zero.train(words, verbose=False)
    assert result["global_step"] == 2 and "eval_loss" not in result


def test_train_input_errors(corpus, tmp_path):
    with pytest.raises(zero.InputError, match="unknown option '--max_step'; did you mean"):
        zero.train({"max_step": 3})
    with pytest.raises(zero.MissingFileError, match=r"train_file: no such file or directory: "
                                                    r"'.*absent.txt'"):
        zero.train(tiny_train_flags(tmp_path / "absent.txt", tmp_path / "out"), verbose=False)
    with pytest.raises(TypeError):
        zero.train("--max_steps 3")
    # A missing file inside the words reaches the trainer's own check.
    with pytest.raises(zero.InputError, match=r"--train_file: data file .*absent.txt\" does not "
                                              r"exist"):
        zero.train(["--train_file", str(tmp_path / "absent.txt"), "--do_train", "True",
                    "--output_dir", str(tmp_path / "out")], verbose=False)


def test_checkpoint_info_and_consolidate_match_the_cli(trained, cli, tmp_path):
    output_dir, _ = trained
    info = zero.checkpoint.info(output_dir)
    assert info["valid"] and info["world_size"] == 1 and info["global_steps"] == 4
    assert info["folder"].endswith("checkpoint-4")
    assert info["parameters"] == sum(info["units"].values())
    assert [file["rank"] for file in info["files"]] == [0]
    assert "step 4" in run_cli(cli, "checkpoint", "info", output_dir).stdout
    summary = zero.checkpoint.consolidate(output_dir, tmp_path / "ours")
    assert summary["architecture"] == "GPT2LMHeadModel" and summary["global_steps"] == 4
    run_cli(cli, "checkpoint", "consolidate", output_dir, tmp_path / "theirs")
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes()
    with pytest.raises(zero.Error, match="zero_checkpoint.json|no checkpoint"):
        zero.checkpoint.info(tmp_path)


CHILD = """
import json, sys, zero
result = zero.train(json.loads(sys.argv[1]), verbose=True)
print("RESULT " + json.dumps({k: result[k] for k in ("global_step", "preempted", "train_loss")
                              if k in result}), flush=True)
"""


def test_sigint_stops_after_the_step_with_a_checkpoint(corpus, tmp_path):
    output_dir = tmp_path / "out"
    flags = tiny_train_flags(corpus, output_dir, max_steps=100000, do_eval=False,
                             save_steps=100000, logging_steps=1)
    flags = {key: str(value) if isinstance(value, os.PathLike) else value
             for key, value in flags.items()}
    child = subprocess.Popen([PYTHON, "-c", CHILD, json.dumps(flags)], env=python_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (output_dir / "metrics.jsonl").exists() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # a few steps in
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    result = json.loads(out.split("RESULT ", 1)[1])
    assert result["preempted"] and 0 < result["global_step"] < 100000
    assert "preempted (SIGINT)" in out + err
    info = zero.checkpoint.info(output_dir)
    assert info["global_steps"] == result["global_step"]


MPI_CHILD = """
import json, sys, zero
result = zero.train(json.loads(sys.argv[1]), verbose=True)
info = zero.checkpoint.info(sys.argv[2]) if result["global_step"] else None
print("RESULT " + json.dumps({"step": result["global_step"], "loss": result["train_loss"],
                              "world": info["world_size"]}), flush=True)
"""


def test_train_under_mpirun_at_two_ranks(corpus, tmp_path):
    launcher = mpirun()
    if launcher is None:
        pytest.skip("mpirun not found")
    output_dir = tmp_path / "out"
    flags = {key: str(value) if isinstance(value, os.PathLike) else value
             for key, value in tiny_train_flags(corpus, output_dir, do_eval=False).items()}
    flags["deepspeed"] = str(tmp_path / "ds.json")
    (tmp_path / "ds.json").write_text(json.dumps({
        "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "zero_optimization": {"stage": 3}}))
    env = {**python_env(), **MPI_ENV}
    run = subprocess.run([*launcher, "-np", "2", PYTHON, "-c", MPI_CHILD, json.dumps(flags),
                          str(output_dir)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    # mpirun forwards both ranks' stdout into one stream, where one rank's line can arrive before
    # the other's newline ("RESULT {...}RESULT {...}"): read every RESULT object, not lines.
    results = [json.loads(found) for found in re.findall(r"RESULT (\{[^{}]*\})", run.stdout)]
    assert len(results) == 2
    assert all(r["step"] == 4 and r["world"] == 2 for r in results)
    assert results[0]["loss"] == results[1]["loss"]


def test_libmpi_is_global_after_import():
    """Open MPI's plugins resolve libmpi's symbols from the global scope (RTLD_GLOBAL)."""
    import ctypes
    if not any("/libmpi.so" in line for line in open("/proc/self/maps")):
        pytest.skip("the module is built without MPI")
    assert hasattr(ctypes.CDLL(None), "MPI_Init_thread")
