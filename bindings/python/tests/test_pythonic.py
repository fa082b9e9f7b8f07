"""The module as a Python user meets it: keyword arguments checked by type and naming the argument,
typed exceptions, training data from Python, a metrics callback, log lines on sys.stdout (what a
notebook shows) and log records through logging."""

import errno
import json
import logging
import math

import pytest

import zero
from conftest import WORDS, tiny_train_flags

SEVEN_B = {"params": "7e9", "largest_layer_params": "2.1e8"}


def test_exceptions_are_the_builtins_python_code_catches():
    assert issubclass(zero.InputError, ValueError) and issubclass(zero.InputError, zero.Error)
    assert issubclass(zero.ConfigError, zero.InputError)
    assert issubclass(zero.MissingFileError, FileNotFoundError)
    assert issubclass(zero.MissingFileError, zero.InputError)
    assert issubclass(zero.ArgumentTypeError, TypeError)
    assert issubclass(zero.ArgumentTypeError, zero.Error)
    assert issubclass(zero.RunError, RuntimeError) and issubclass(zero.RunError, zero.Error)
    assert not issubclass(zero.InputError, RuntimeError)


def test_estimate_world_size_of_the_wrong_type_names_it():
    with pytest.raises(zero.ArgumentTypeError, match=r"world_size: expected an int, got str "
                                                     r"'eight'"):
        zero.estimate(world_size="eight", **SEVEN_B)
    with pytest.raises(TypeError, match="world_size"):
        zero.estimate(world_size=8.0, **SEVEN_B)
    with pytest.raises(ValueError, match="world_size: must be at least 1, got 0"):
        zero.estimate(world_size=0, **SEVEN_B)
    with pytest.raises(zero.ArgumentTypeError, match="num_nodes: expected an int"):
        zero.estimate(world_size=8, num_nodes="two", **SEVEN_B)


def test_estimate_flag_of_the_wrong_type_names_it():
    with pytest.raises(zero.ArgumentTypeError, match=r"zero_stage: expected an int, got list"):
        zero.estimate(zero_stage=[3], **SEVEN_B)
    with pytest.raises(zero.ArgumentTypeError, match=r"bf16: expected a bool, got str 'yes'"):
        zero.estimate(bf16="yes", **SEVEN_B)


def test_train_keyword_of_the_wrong_type_names_it(corpus, tmp_path):
    flags = tiny_train_flags(corpus, tmp_path / "out")
    for name, value, expected in [("max_steps", "three", "an int"),
                                  ("learning_rate", "fast", "a float"),
                                  ("do_train", 1, "a bool"),
                                  ("train_file", 7, "a str, a path or a list")]:
        with pytest.raises(zero.ArgumentTypeError, match=f"^{name}: expected {expected}"):
            zero.train(**{**flags, name: value}, verbose=False)
    with pytest.raises(zero.ArgumentTypeError, match="on_log: expected a callable"):
        zero.train(**flags, on_log="print", verbose=False)
    assert not (tmp_path / "out").exists()


def test_missing_files_are_file_not_found_errors_naming_the_argument(corpus, tmp_path):
    flags = tiny_train_flags(corpus, tmp_path / "out")
    absent = tmp_path / "absent.txt"
    with pytest.raises(FileNotFoundError) as error:
        zero.train(**{**flags, "validation_file": absent}, verbose=False)
    assert isinstance(error.value, zero.MissingFileError)
    assert error.value.argument == "validation_file" and error.value.filename == str(absent)
    assert error.value.errno == errno.ENOENT
    assert str(error.value) == f"[Errno 2] validation_file: no such file or directory: '{absent}'"
    with pytest.raises(zero.MissingFileError, match="deepspeed: no such file .*ds.json'$"):
        zero.train(**flags, deepspeed=str(tmp_path / "ds.json"), verbose=False)
    with pytest.raises(zero.MissingFileError, match="deepspeed: no such file"):
        zero.estimate(deepspeed=tmp_path / "ds.json", **SEVEN_B)
    with pytest.raises(zero.MissingFileError, match="path_or_dict: no such file"):
        zero.config.resolve(tmp_path / "ds.json")


def corpus_texts():
    return [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12)) for i in range(400)]


def test_train_from_python_texts_with_a_metrics_callback_and_stdout(corpus, tmp_path, capsys):
    texts = corpus_texts()
    entries = []
    flags = tiny_train_flags(corpus, tmp_path / "python", eval_strategy="steps", eval_steps=2)
    del flags["train_file"]
    result = zero.train(train_dataset=texts, **flags, on_log=entries.append)
    out = capsys.readouterr().out
    # The callback saw each entry as it was logged: the result's history, in order.
    assert entries == result["log_history"]
    assert [entry["step"] for entry in entries if "loss" in entry] == [1, 2, 3, 4]
    assert sum("eval_loss" in entry for entry in entries) >= 2
    assert all(math.isfinite(entry["loss"]) for entry in entries if "loss" in entry)
    # The trainer's lines reached sys.stdout (pytest's capture, as a notebook's cell output).
    assert "step 4/4" in out and "eval_loss" in out
    # The same examples from a JSON Lines file give the same run.
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    from_file = zero.train(**{**flags, "train_file": path, "output_dir": tmp_path / "file"},
                           verbose=False)
    assert capsys.readouterr().out == ""
    assert [e.get("loss") for e in from_file["log_history"]] == \
        [e.get("loss") for e in result["log_history"]]


def test_python_data_errors(corpus, tmp_path):
    flags = tiny_train_flags(corpus, tmp_path / "out")
    without_file = {key: value for key, value in flags.items() if key != "train_file"}
    with pytest.raises(zero.ArgumentTypeError, match="^train_dataset: expected a list of str"):
        zero.train(train_dataset="one long text", **without_file, verbose=False)
    with pytest.raises(zero.ArgumentTypeError, match=r"^eval_dataset\[1\]: expected a str, "
                                                     r"got int"):
        zero.train(train_dataset=corpus_texts(), eval_dataset=["a", 2], **without_file,
                   verbose=False)
    with pytest.raises(zero.InputError, match="^train_dataset: give train_dataset or "
                                              "train_file, not both"):
        zero.train(train_dataset=["a"], **flags, verbose=False)
    with pytest.raises(zero.InputError, match="^train_dataset: no examples"):
        zero.train(train_dataset=[], **without_file, verbose=False)


def test_an_exception_in_the_callback_ends_the_run(corpus, tmp_path):
    class Stop(Exception):
        pass

    def stop_at_two(entry):
        if entry["step"] == 2:
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        zero.train(**tiny_train_flags(corpus, tmp_path / "out", do_eval=False),
                   on_log=stop_at_two, verbose=False)


def test_log_records_go_through_logging(corpus, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="zero")
    zero.train(**tiny_train_flags(corpus, tmp_path / "out", max_steps=1, do_eval=False),
               verbose=False)
    records = [record for record in caplog.records if record.name == "zero"]
    assert any("launch:" in record.getMessage() for record in records)
    assert all(record.getMessage().startswith("[rank 0/1] ") for record in records)
    assert all(record.rank == 0 and record.world_size == 1 for record in records)


def test_a_dry_run_prints_its_plan_on_sys_stdout(corpus, tmp_path, capsys):
    result = zero.train(**tiny_train_flags(corpus, tmp_path / "out"), dry_run=True, world_size=2)
    out = capsys.readouterr().out
    assert [plan["rank"] for plan in result["plan"]] == [0, 1]
    assert out.startswith("dry run: GPT-2 1 layers, width 32")
    assert "planned 2 rank(s)" in out and "nothing allocated" in out
    assert not (tmp_path / "out").exists()
