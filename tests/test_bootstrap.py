"""The workers' one bootstrap (benchlib.workers.bootstrap): the parameters of a run.json
under the command line's flags, and bad run.json files refused in one line."""

import json
import subprocess
import sys

import pytest

from benchlib.core import envinfo
from benchlib.errors import ConfigError, UsageError
from benchlib.launch import protocol
from benchlib.trainers.ddp import train
from benchlib.trainers.ddp_flags import check_args
from benchlib.trainers.ddp_flags import parser as ddp_parser
from benchlib.workers.bootstrap import Plain, parse
from benchlib.workers.elastic import Elastic
from benchlib.workers.lightning import Lightning


def ddp_worker() -> Plain:
    return Plain(train, ddp_parser("ddp"), check_args)


def run_json(tmp_path, params) -> str:
    return str(protocol.write_run_config(tmp_path, "ddp", params))


def test_a_run_json_gives_the_parameters_and_a_flag_given_as_well_wins(tmp_path):
    path = run_json(tmp_path, {"model": "toynet", "batch_size": 7, "lr": 0.5,
                               "channels_last": True, "device": "cpu"})
    args = parse(ddp_worker().parser(), ["--config", path, "--batch-size", "9"])
    assert (args.model, args.batch_size, args.lr, args.channels_last, args.device) == \
        ("toynet", 9, 0.5, True, "cpu")
    plain = parse(ddp_worker().parser(), [])
    assert (plain.model, plain.channels_last) == ("pyramidnet", False)  # the parser's defaults


@pytest.mark.parametrize("worker", [Elastic(), Lightning()])
def test_the_elastic_and_lightning_workers_read_a_run_json_too(tmp_path, worker):
    args = parse(worker.parser(), ["--config", run_json(tmp_path, {"batch_size": 5})])
    assert args.batch_size == 5


@pytest.mark.parametrize("params, error, message", [
    ({"batch_sise": 8}, ConfigError, "config: {path}: 'batch_sise' is not a parameter of "
                                     "benchlib.workers.ddp; it takes ac, alpha, augment, backend"),
    ({"precision": "fp8"}, ConfigError, "precision: 'fp8' (in {path}) is not one of fp32, "
                                        "tf32, amp_bf16, amp_fp16"),
    ({"channels_last": 1}, ConfigError, "channels_last: 1 (in {path}) must be true or false"),
    ({"compile": "fast"}, ConfigError, "compile: 'fast' (in {path}) is not one of off, default, "
                                       "reduce-overhead, max-autotune, regional"),
    ({"epochs": True}, ConfigError, "epochs: True (in {path}) must be a value, not true or false"),
    ({"epochs": 2.5}, ConfigError, "epochs: 2.5 (in {path}) is not int"),
])
def test_a_run_json_with_a_bad_parameter_is_refused_naming_it(tmp_path, params, error, message):
    path = run_json(tmp_path, params)
    with pytest.raises(error) as e:
        parse(ddp_worker().parser(), ["--config", path])
    assert str(e.value).startswith(message.format(path=path))


def test_a_run_json_value_is_converted_and_cannot_contradict_the_command_line(tmp_path):
    args = parse(ddp_worker().parser(), ["--config", run_json(tmp_path, {"lr": 1, "epochs": "3"})])
    assert (args.lr, args.epochs) == (1.0, 3) and isinstance(args.lr, float)
    path = run_json(tmp_path, {"resume_or_start": True})
    with pytest.raises(ConfigError, match=f"resume_or_start: cannot go with resume \\(from {path}"):
        parse(Elastic().parser(), ["--config", path, "--resume"])


def test_a_missing_or_malformed_run_json_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=f"config: {tmp_path / 'nope.json'} does not exist"):
        parse(ddp_worker().parser(), ["--config", str(tmp_path / "nope.json")])
    (tmp_path / "bad.json").write_text('{"worker": "x"}')
    with pytest.raises(UsageError, match='has no "params" object'):
        parse(ddp_worker().parser(), ["--config", str(tmp_path / "bad.json")])


def test_a_worker_started_by_hand_from_a_run_json_trains_with_its_parameters_and_ends_with_a_one_line_result(
        tmp_path):
    """What a study's launch does, by hand: the worker's parameters in a file, one flag on
    top; the run's result says which were used, and the worker's output (no --log-dir:
    the terminal's) ends with the result in one line."""
    path = run_json(tmp_path, {"dataset": "synthetic", "model": "simplecnn", "image_size": 32,
                               "batch_size": 6, "epochs": 2,
                               "max_steps": 50, "warmup_steps": 1, "device": "cpu",
                               "log_interval": 0})
    done = subprocess.run([sys.executable, "-m", "benchlib.workers.single", "--config", path,
                           "--max-steps", "4", "--result", str(tmp_path / "result.json")],
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["metrics"]["global_batch"] == 6
    assert [e["steps"] for e in result["details"]["epochs"]] == [4, 4]  # the flag won over 50
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("result: ") and " samples/s (p10 " in last and "2 epochs), epoch " in last
    assert last.endswith(f", 1 rank(s), on {envinfo.cpu_model()}")
    bad = subprocess.run([sys.executable, "-m", "benchlib.workers.single", "--config",
                          str(tmp_path / "missing.json")],
                         capture_output=True, text=True, timeout=180, check=False)
    assert bad.returncode == 2
    missing = tmp_path / "missing.json"
    assert bad.stderr == f"benchlib.workers.single: config: {missing} does not exist\n"


def test_a_model_that_is_neither_built_in_nor_an_entry_point_is_refused_before_training(tmp_path):
    """`model` takes any text on the command line (an entry point is the user's to name);
    the worker's check refuses what is neither a built-in name nor an entry point."""

    args = parse(ddp_worker().parser(), ["--config", run_json(tmp_path, {"model": "vit"})])
    with pytest.raises(ConfigError, match="model: 'vit' is not one of toynet, simplecnn, "
                                          "pyramidnet, resnet18, resnet50, gpt-tiny"):
        check_args(args)


@pytest.mark.parametrize("strategy", ["single", "dp", "ddp", "fsdp2"])
def test_a_workers_help_and_its_refusal_of_a_bad_flag_import_no_torch(strategy):
    """Every rank of a launch refuses bad flags, and a user asks for --help: neither waits
    for torch (2.3 to 3.5 CPU s a process here); the trainer is imported once a rank starts
    its work (`Later`), and travels to mp.spawn's ranks as a value."""
    import pickle
    import textwrap

    from benchlib.workers.bootstrap import Later

    probe = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["w"] + sys.argv[1:]
        try:
            runpy.run_module("benchlib.workers.{strategy}", run_name="__main__")
        except SystemExit as e:
            print(e.code, "torch" in sys.modules)
    """)
    ran = [subprocess.run([sys.executable, "-c", probe, *flags], capture_output=True, text=True,
                          check=True) for flags in (["--help"], ["--batch-size", "0"])]
    assert [r.stdout.split()[-2:] for r in ran] == [["0", "False"], ["2", "False"]]
    assert f"usage: benchlib.workers.{strategy}" in ran[0].stdout
    assert ran[1].stderr == f"benchlib.workers.{strategy}: batch_size: must be >= 1, got 0\n"
    later = pickle.loads(pickle.dumps(Later("benchlib.trainers.ddp", "train")))
    assert later == Later("benchlib.trainers.ddp", "train")
