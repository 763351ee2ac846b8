import json
import math
import re
import subprocess
import sys
import time

import pytest
import torch

from benchlib.cli import main
from benchlib.config import SingleDeviceIoConfig
from benchlib.core import allocator, envinfo
from benchlib.errors import ConfigError, UsageError
from benchlib.records import results
from benchlib.studies import single_device_io

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


def test_run_summarises_repeats_with_spread(small_data):
    cfg = SingleDeviceIoConfig(path=str(small_data), dataset="mydataset", variant="preload", mode="train",
                   device="cpu", repeats=4, warmup_steps=2, epochs=2)
    result = single_device_io.run(cfg)
    m = result.metrics
    assert len(result.repeats) == 4 and m["samples_per_s_n"] == 4
    assert m["samples_per_s_p10"] <= m["samples_per_s"] <= m["samples_per_s_p90"]
    # 4 repeats: the range, not a bootstrap "95%" interval (that needs 5 or more)
    assert m["samples_per_s_min"] <= m["samples_per_s"] <= m["samples_per_s_max"]
    assert math.isnan(m["samples_per_s_ci95_low"])
    assert m["steps_per_epoch"] == 5 and m["samples"] == 300 and m["global_batch"] == 64
    assert 0 < m["data_share"] < 1 and m["data_source"] == "generated"
    # the CPU's model, as on a GPU host the GPU's: two CPU hosts are two machines
    assert m["device_name"] == envinfo.cpu_model() != "cpu" and m["peak_mem_bytes"] is None
    # total_s is the wall time of both epochs, longer than the timed steps alone
    for r in result.repeats:
        assert r["total_s"] > r["data_s"] + r["compute_s"] > 0
    assert m["loss_first"] > 0 and m["trace_path"] is None
    # start-up beside the steady rate: the first batch, the warm-up, the whole epoch
    assert 0 < m["first_batch_s"] <= m["warmup_s"] < m["epoch_s"]
    assert m["epoch_samples_per_s"] == pytest.approx(300 / m["epoch_s"], rel=0.3)
    assert m["startup_gap"] == pytest.approx(m["samples_per_s"] / m["epoch_samples_per_s"])
    assert m["data_share_low"] <= m["data_share"] <= m["data_share_high"]
    assert "over the whole epoch, first batch after" in single_device_io.describe(cfg, result)
    # the window each figure is of: the steps timed, the epoch's; the gap over 8 epochs
    assert m["window_steps"] + m["warmup_steps_excluded"] == m["epoch_steps"] == 5
    assert m["epoch_samples"] == 300 and m["startup_gap_n"] == 8 and m["epoch_samples_per_s_n"] == 8
    assert m["startup_gap_low"] <= m["startup_gap_high"]
    # io's summary says it in words where the steady rate hides the start-up
    m.update(samples_per_s=1549.0, epoch_samples_per_s=150.0, startup_gap=10.3,
             startup_gap_low=9.8, startup_gap_high=11.0, startup_hidden=True,
             first_batch_s=119.0, warmup_s=119.4)
    assert single_device_io.describe(cfg, result).splitlines()[1] == (
        f"  start-up hidden by the steady rate: 1,549 samples/s steady ({m['window_steps']} "
        f"steps, {m['window_samples']} samples timed an epoch), 150 over the whole epoch of 300 "
        "samples (10.3x, 9.8-11.0 over 8 epochs); the first batch came after 119 s, the "
        "warm-up left out 119 s")


def test_warmup_that_leaves_no_timed_step_is_refused(small_data):
    cfg = SingleDeviceIoConfig(path=str(small_data), dataset="mydataset", device="cpu", warmup_steps=5)
    with pytest.raises(ConfigError, match="warmup_steps: 5 leaves no timed step: an epoch of 300 "
                                          "samples has 5 steps"):
        single_device_io.run(cfg)


@NO_CUDA
def test_gpu_without_cuda_is_an_error_not_a_cpu_run(small_data):
    with pytest.raises(UsageError, match="device: gpu asked for, but torch .* sees no CUDA device"):
        single_device_io.run(SingleDeviceIoConfig(path=str(small_data), device="gpu"))


def test_cli_io_writes_a_record_with_profile_and_trace(small_data, outputs, capsys):
    code = main(["io", "1", "cpu", "--path", str(small_data), "--dataset", "fashion-mnist",
                 "--variant", "preload_batched", "--repeats", "2", "--profile", "--export-trace"])
    assert code == 0
    out = capsys.readouterr().out
    assert f"fashion-mnist preload_batched train on {envinfo.cpu_model()}, num_workers=0:" in out
    record = json.loads(open(out.split("record: ")[1].strip()).read())
    assert record["status"] == "ok" and record["study"] == "single_device_io" and record["table"] == "io"
    assert record["params"]["variant"] == "preload_batched" and record["params"]["profile"] is True
    trace = record["metrics"]["trace_path"]
    assert trace.startswith(str(outputs / "traces")) and '"traceEvents"' in open(trace).read()
    assert record["details"]["profile"][0]["calls"] >= 1
    assert len(record["details"]["repeats"]) == 2


BAD = [
    (["--num-workers", "-1"], "num_workers: must be >= 0, got -1"),
    (["--batch-size", "0"], "batch_size: must be >= 1, got 0"),
    (["--dataset", "cifar"], "dataset: 'cifar' is not one of fashion-mnist, mydataset"),
    (["--variant", "lmdb"], "variant: 'lmdb' is not one of raw, preload, preload_batched"),
    (["--export-trace"], "export_trace: needs profile = True"),
    (["--model", "examples.custom_model:build", "--model-args", '{"in_channels": 1}'],
     "model: examples.custom_model:build gives (2, 4) for 2 images of 1x28x28; training "
     "needs (2, >= 10) scores"),
    (["--model", "examples.custom_model:build"],
     "model: examples.custom_model:build fails on 2 images of 1x28x28: RuntimeError: "),
    (["--model", "toynet", "--model-args", '{"width": 8}'],
     "model_args: toynet is built in and takes none"),
]


@pytest.mark.parametrize("extra, message", BAD)
def test_cli_io_bad_input_is_one_line_exit_2_and_no_record(small_data, outputs, capsys, extra, message):
    args = ["io", "1", "cpu", "--path", str(small_data), "--dataset", "fashion-mnist"]
    # a later --dataset overrides the first one, as argparse does
    assert main(args + extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("benchlib io: ") and message in err and "\n" not in err
    assert not outputs.exists()


@NO_CUDA
def test_cli_io_gpu_without_cuda_and_missing_path(tmp_path, small_data, outputs, capsys):
    assert main(["io", "1", "gpu", "--path", str(small_data), "--dataset", "mydataset"]) == 2
    assert "device: gpu asked for" in capsys.readouterr().err
    assert main(["io", "1", "cpu", "--path", str(tmp_path / "none"), "--dataset", "mydataset"]) == 2
    assert "has no mydataset data; run `python -m benchlib data --path" in capsys.readouterr().err
    assert not outputs.exists()


def test_calibrate_prints_the_loop_ratio_and_fetch_ceiling(small_data, capsys):
    assert main(["calibrate", "--steps", "3", "--rounds", "2", "--path", str(small_data)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("allocator: glibc")
    assert "train loop: benchlib / bare = " in out[1] and "range " in out[1] and "n=2 rounds" in out[1]
    assert "benchlib adds" in out[1] and "us per step" in out[1]
    assert out[2].startswith("ground truth: reported (host clock) / synchronized wall clock = ")
    assert "5 epochs of 3 steps" in out[2]
    assert out[3].startswith("contiguous copy (memory bandwidth) ceiling: ")
    assert "samples/s of 3136 B each; preload_batched shuffled traverse (" in out[3]
    assert "5 rounds); target >= 40%: " in out[3]
    assert out[4].startswith("shuffled gather (rows by index into a preallocated batch) ceiling: ")


KNOWN_STEP_S = 0.05  # the whole of a step of _SleepyNet, bar ~0.1 ms of arithmetic


class _SleepyNet(torch.nn.Module):
    """Stands in for toynet in calibration: its forward waits KNOWN_STEP_S, and its one
    small layer keeps the rest of the step (backward, SGD) to microseconds, so that the
    step's time is known whatever the machine's load (toynet's own step varied 5-200 ms
    on 2 shared cores)."""

    def __init__(self, *_shape):
        super().__init__()
        self.linear = torch.nn.Linear(28 * 28, 10)

    def forward(self, x):
        time.sleep(KNOWN_STEP_S)
        return self.linear(x.flatten(1))


def test_calibrate_event_and_wall_clocks_recover_a_known_step_time(monkeypatch):
    """On CPU both clocks of event_vs_wall are the host clock, so their ratio alone cannot
    be wrong; each is checked against steps of a known length instead."""
    from benchlib.studies import calibrate

    monkeypatch.setattr(calibrate, "build_model", lambda name, shape: _SleepyNet(shape))
    threads = torch.get_num_threads()
    # one thread: with two on 2 loaded cores, each op after the sleep waited 50-80 ms for
    # the pool's second thread to be scheduled, a cost of the machine and not of a clock
    torch.set_num_threads(1)
    try:
        clock = calibrate.event_vs_wall(torch.device("cpu"), "toynet", batch_size=8, steps=5,
                                        rounds=3)
    finally:
        torch.set_num_threads(threads)
    for figure in ("reported_samples_per_s", "wall_samples_per_s"):
        step_s = 8 / clock[figure]  # seconds per step of 8 samples, the median round's
        # never shorter than the known wait; 20 ms above it for a loaded machine's
        # scheduling, and a time counted twice or in the wrong unit still fails
        assert KNOWN_STEP_S <= step_s < KNOWN_STEP_S + 0.02, (figure, step_s)
    # the steps' times cover their epoch: 5% of a 250 ms epoch is a step's fifth, and a
    # step left out of the reported figure would raise the ratio to 1.25
    assert 1.0 <= clock["event_over_wall"] < 1.05 and clock["event_over_wall_n"] == 3


def test_calibrate_writes_its_figures_and_refuses_a_bad_model(tmp_path, capsys):
    figures = tmp_path / "cal.json"
    assert main(["calibrate", "--steps", "2", "--rounds", "2", "--batch-size", "4",
                 "--json", str(figures)]) == 0
    written = json.loads(figures.read_text())
    assert written["device"] == "cpu" and written["loop"]["model"] == "toynet"
    assert written["loop"]["ratio_n"] == 2 and written["clock"]["steps"] == 2
    assert main(["calibrate", "--steps", "0"]) == 2
    assert "calibrate: steps: must be >= 1, got 0" in capsys.readouterr().err


def test_allocator_option_restarts_the_command_with_it():
    env_json = subprocess.run([sys.executable, "-m", "benchlib", "--allocator", "tuned", "env",
                               "--json"], capture_output=True, text=True, check=True).stdout
    alloc = json.loads(env_json)["allocator"]
    assert alloc["glibc_tunables"] == allocator.TUNED and alloc["name"] == "glibc"


def test_unknown_or_missing_allocator_is_refused():
    with pytest.raises(UsageError, match="allocator: 'hoard' is not one of default, tuned"):
        allocator.environment_for("hoard")
    try:
        env = allocator.environment_for("jemalloc")
        assert "jemalloc" in env["LD_PRELOAD"]
    except UsageError as e:
        assert "jemalloc is not installed here (apt-get install libjemalloc2)" in str(e)


def test_io_train_mode_trains_your_own_model_and_the_record_names_it(
        small_data, outputs, capsys):
    """examples/custom_model.py's model (an entry point, with model_args) in notebook 10's
    train mode, 1 epoch of 600 images."""
    code = main(["io", "1", "cpu", "--path", str(small_data), "--dataset", "fashion-mnist",
                 "--variant", "preload_batched", "--repeats", "1",
                 "--model", "examples.custom_model:build",
                 "--model-args", '{"width": 8, "in_channels": 1, "num_classes": 10}'])
    assert code == 0
    out = capsys.readouterr().out
    record = json.loads(open(out.split("record: ")[1].strip()).read())
    assert record["status"] == "ok" and record["params"]["mode"] == "train"
    assert record["params"]["model"] == "examples.custom_model:build"
    assert record["params"]["model_args"] == {"width": 8, "in_channels": 1, "num_classes": 10}
    m = record["metrics"]
    assert m["samples_per_s"] > 0 and m["loss_last"] > 0
    assert m["model_params"] == 8 * 9 + 2 * 8 * 8 * 9 + 3 * 2 * 8 + 8 * 10 + 10  # convs, BN, head
    assert len(m["model_source_sha"]) == 16 and m["model_class"] == "examples.custom_model.WideCNN"
    assert m["flops_per_sample"] > 0


def test_a_timm_model_in_train_mode_names_its_class_and_flops_per_sample():
    from benchlib.studies import single_device_io

    m = single_device_io.model_figures(SingleDeviceIoConfig(model="timm:resnet10t"))
    assert m["model_class"] == "timm.models.resnet.ResNet" and m["model_params"] > 0
    assert m["model_source"].startswith("timm ") and m["flops_per_sample"] > 1e6
    assert single_device_io.model_figures(SingleDeviceIoConfig(mode="traverse")) == {
        "model_class": None, "model_params": None, "model_source_sha": None,
        "flops_per_sample": None}


def test_io_refuses_a_model_for_colour_images():
    with pytest.raises(ConfigError, match="model: 'resnet18' is not one of toynet, simplecnn, pyramidnet"):
        SingleDeviceIoConfig(model="resnet18")


def test_a_sweep_row_whose_warmup_covers_the_epoch_is_refused_before_any_kernel_starts(
        tmp_path, small_data, outputs, capsys):
    # 300 MyDataSet samples at batch 64: 5 steps, all of them warm-up
    file = tmp_path / "io.yaml"
    file.write_text(f"name: io\nnotebook: 10_single_device_io\ndefaults: {{path: {small_data}, "
                    "device: cpu, dataset: mydataset, epochs: 1, repeats: 1}\n"
                    "table: [{warmup_steps: 5}]\n")
    assert main(["sweep", str(file)]) == 2
    assert capsys.readouterr().err == (f"benchlib sweep: {file}: row 1: warmup_steps: 5 leaves "
                                       "no timed step: an epoch of 300 samples has 5 steps\n")
    assert not outputs.exists()  # no kernel ran, no failed record


def test_io_label_help_says_a_rerun_adds_a_record_and_it_does(small_data, outputs, capsys):
    for command in ("io", "allreduce"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        label_help = re.search(r"--label LABEL (.*?)(?= --\w|$)", text).group(1)
        assert "skipped" not in label_help and "each run adds a record" in label_help, command
    argv = ["io", "1", "cpu", "--path", str(small_data), "--dataset", "fashion-mnist",
            "--label", "mine"]
    assert main(argv) == 0 and main(argv) == 0
    records = sorted(results.read_records(outputs / "results"), key=lambda r: r["started_at"])
    assert len(records) == 2 and {r["label"] for r in records} == {"mine"}
    # one name for the command, in the id and in the record: the id is the row's identity
    # (table, that name, parameters, testbed), and the rerun's a free one beside it
    first, rerun = records
    assert first["notebook"] == rerun["notebook"] == "benchlib io (CLI)"
    assert first["run_id"] == results.run_id_for("io", "benchlib io (CLI)", first["params"],
                                                 first["testbed"]["id"]) != rerun["run_id"]


def test_the_model_and_schedule_fields_shared_with_the_training_studies_reach_the_step():
    """Notebook 10 composes the training studies' model and data and schedule: PyramidNet's
    depth builds the model, SGD's momentum its optimizer (seed 000's: none)."""
    assert SingleDeviceIoConfig().momentum == 0.0
    cfg = SingleDeviceIoConfig(model="pyramidnet", depth=32, momentum=0.5)
    deeper = single_device_io._stepper(cfg, torch.device("cpu"), 0)
    plain = single_device_io._stepper(SingleDeviceIoConfig(model="pyramidnet"),
                                      torch.device("cpu"), 0)
    assert deeper.optimizer.param_groups[0]["momentum"] == 0.5
    assert plain.optimizer.param_groups[0]["momentum"] == 0.0
    assert sum(p.numel() for p in deeper.model.parameters()) > \
        sum(p.numel() for p in plain.model.parameters())
    with pytest.raises(ConfigError, match="depth: PyramidNet depth must be 6n \\+ 2"):
        SingleDeviceIoConfig(model="pyramidnet", depth=21)
