"""zero.estimate, zero.plan, zero.config.resolve/validate and the exceptions: the same content and
messages as the `zero` CLI's estimate --json, train --dry_run and config."""

import json

import pytest

import zero
from conftest import run_cli

SEVEN_B = {"params": "7e9", "largest_layer_params": "2.1e8"}


def without_measured(estimate):
    """The estimate less what is measured in the planning process (its VmRSS, the baseline, and
    what adds it: each phase's resident bytes and the node's needs), which differs between the
    Python process and the CLI's; the baseline is checked to be a measurement on its own."""
    estimate = json.loads(json.dumps(estimate))
    assert estimate.pop("baseline_bytes") > 0
    node = estimate.pop("node")
    assert node["needed_bytes"] > 0
    assert "the largest phase" in node["message"] or "does not fit" in node["message"]
    for phase in estimate["phases"].values():
        assert phase.pop("resident_host_bytes") > 0
    return estimate


def test_exception_hierarchy():
    assert issubclass(zero.ConfigError, zero.Error)
    assert issubclass(zero.InputError, zero.Error)
    assert issubclass(zero.Error, Exception)
    assert issubclass(zero.ConfigError, zero.InputError)


def test_estimate_is_the_cli_json(cli):
    ours = zero.estimate(world_size=8, zero_stage=3, gpu_memory="80GiB", **SEVEN_B)
    theirs = json.loads(run_cli(cli, "estimate", "--json", "--num_gpus_per_node", 8,
                                "--zero_stage", 3, "--gpu_memory", "80GiB", "--params", "7e9",
                                "--largest_layer_params", "2.1e8").stdout)
    assert without_measured(ours) == without_measured(theirs)
    assert ours["hardware"]["num_gpus_per_node"] == 8
    assert ours["model"]["parameters"] > 6.9e9


def test_estimate_of_a_gpt2_model_with_a_config_dict(cli, tmp_path):
    config = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2},
              "bf16": {"enabled": True}}
    ours = zero.estimate(deepspeed=config, world_size=4, block_size=256,
                         config_overrides="n_layer=4,n_embd=256,n_head=4")
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    theirs = json.loads(run_cli(cli, "estimate", "--json", "--deepspeed", path,
                                "--num_gpus_per_node", 4, "--block_size", 256,
                                "--config_overrides", "n_layer=4,n_embd=256,n_head=4").stdout)
    assert without_measured(ours) == without_measured(theirs)
    assert ours["configuration"]["stage"] == 2 and ours["configuration"]["micro_batch"] == 4


def test_estimate_flag_errors_are_input_errors_with_the_cli_message(cli):
    with pytest.raises(zero.InputError, match=r"unknown option '--zero_stag'; did you mean "
                                              r"--zero_stage\?"):
        zero.estimate(zero_stag=3)
    with pytest.raises(zero.InputError) as error:
        zero.estimate(params="7e9")
    cli_error = run_cli(cli, "estimate", "--params", "7e9", check=False)
    assert cli_error.returncode == 2
    assert str(error.value) in cli_error.stderr
    with pytest.raises(zero.InputError, match="world_size 6 contradicts"):
        zero.estimate(world_size=6, num_gpus_per_node=4)


def test_fits_is_one_answer_for_the_node_asked_about(cli):
    # No --cpu_memory: the planned node's memory is unknown, so only the GPU is judged, and the
    # node section says so instead of judging this machine's MemTotal.
    unchecked = zero.estimate(world_size=8, zero_stage=3, gpu_memory="80GiB", **SEVEN_B)
    assert unchecked["node"]["checked"] is False and unchecked["node"]["fits"] is None
    assert unchecked["node"]["message"].startswith("not checked: --cpu_memory")
    assert unchecked["node"]["needed_bytes"] > 0
    assert unchecked["fits"] == unchecked["gpu_rank"]["fits"] is True
    assert "node memory not checked" in unchecked["fits_budget"]
    # A node with room for the ranks' host bytes but not for the run's largest phase (the load,
    # with its baseline): the answer is no, as the node section says, and it says against what.
    needed_mib = unchecked["node"]["needed_bytes"] // 2**20
    host_mib = unchecked["host_per_node"]["bytes"] // 2**20
    assert host_mib < needed_mib
    between = f"{(host_mib + needed_mib) // 2}MiB"
    small = zero.estimate(world_size=8, zero_stage=3, gpu_memory="80GiB", cpu_memory=between,
                          **SEVEN_B)
    assert small["gpu_rank"]["fits"] and small["host_per_node"]["fits"]
    assert small["node"]["checked"] and small["node"]["fits"] is False
    assert small["node"]["message"].startswith("does not fit")
    assert small["fits"] is False
    assert "per node (--cpu_memory)" in small["fits_budget"]
    large = zero.estimate(world_size=8, zero_stage=3, gpu_memory="80GiB",
                          cpu_memory=f"{needed_mib * 4}MiB", **SEVEN_B)
    assert large["node"]["fits"] is True and large["host_per_node"]["fits"] is True
    assert large["fits"] is True
    # The CLI's tables give the same verdict and budget.
    text = run_cli(cli, "estimate", "--num_gpus_per_node", 8, "--zero_stage", 3,
                   "--gpu_memory", "80GiB", "--cpu_memory", between,
                   "--params", "7e9", "--largest_layer_params", "2.1e8").stdout
    assert f"fits: NO, against {small['fits_budget']}" in text
    # A size past int64's range was a negative size, "not checked", and so "fits".
    with pytest.raises(zero.InputError, match="--cpu_memory: '40000000000' is too large"):
        zero.estimate(world_size=8, cpu_memory="40000000000", **SEVEN_B)


def test_plan_gives_every_rank(tmp_path):
    plans = zero.plan(world_size=4, deepspeed={"zero_optimization": {"stage": 3}},
                      config_overrides="n_layer=2,n_embd=64,n_head=2,n_positions=64",
                      block_size=32, per_device_train_batch_size=2,
                      output_dir=str(tmp_path / "out"))
    assert [plan["rank"] for plan in plans] == [0, 1, 2, 3]
    assert all(plan["world_size"] == 4 for plan in plans)
    assert len({plan["parameters"] for plan in plans}) == 1
    states = plans[0]["model_states"]
    assert states["param_shard"] > 0 and states["params"] == 0  # stage 3: shards only
    assert "device" in plans[0]["spaces"]


GOOD = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
        "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": "auto"}}
BAD = {"train_micro_batch_size_per_gpu": 2,
       "zero_optimization": {"stage": 7, "stage3_param_persistance_threshold": 10}}


def test_resolve_is_the_cli_output(cli, tmp_path):
    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD))
    ours = zero.config.resolve(path, world_size=8, per_device_train_batch_size=4,
                               learning_rate=3e-4, hidden_size=768)
    theirs = json.loads(run_cli(cli, "config", path, "--world_size", 8,
                                "--per_device_train_batch_size", 4, "--learning_rate", 3e-4,
                                "--hidden_size", 768).stdout)
    assert ours == theirs
    assert ours["train_batch_size"] == 32
    assert ours["optimizer"]["params"]["lr"] == pytest.approx(3e-4)
    assert zero.config.resolve(GOOD, world_size=8, per_device_train_batch_size=4,
                               learning_rate=3e-4, hidden_size=768) == ours


def test_validate_lists_each_error_with_path_and_suggestion(cli, tmp_path):
    assert zero.config.validate(GOOD) == []
    errors = zero.config.validate(BAD)
    assert len(errors) == 2
    assert any(e.startswith("zero_optimization.stage") for e in errors)
    assert any("did you mean 'stage3_param_persistence_threshold'" in e for e in errors)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(BAD))
    with pytest.raises(zero.ConfigError) as error:
        zero.config.resolve(path)
    assert error.value.errors == zero.config.validate(path)
    cli_error = run_cli(cli, "config", path, check=False)
    assert cli_error.returncode == 2
    assert f"zero config: error: {error.value}\n" in cli_error.stderr


def test_config_input_errors(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"zero_optimization": ')
    errors = zero.config.validate(broken)
    assert len(errors) == 1 and str(broken) in errors[0]
    with pytest.raises(zero.MissingFileError, match="path_or_dict: no such file or directory: "
                                                    "'/nonexistent/ds.json'"):
        zero.config.resolve("/nonexistent/ds.json")
    with pytest.raises(zero.InputError, match="give --max_steps or --total_steps, not both"):
        zero.config.resolve(GOOD, max_steps=10, total_steps=10)
    with pytest.raises(zero.ArgumentTypeError, match="path_or_dict: expected a config path"):
        zero.config.resolve(42)
