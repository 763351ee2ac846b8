"""diagnose's rules on records built for each case: the host's contention during the run
judged before its load at the start, a contended run's own figures still read and tried,
the compute split into forward and backward, the point rules' borderline from their
spread (start-up over epochs, checkpoint stalls over saves, a CUDA step over epochs),
like for like on both records' parameters (notebook 55's break-even too, world size and
strategy included), `--try`'s alternating order and its word on a shared host."""

import pandas as pd
import pytest

from benchlib.cli import diagnose as diagnose_cli
from benchlib.diagnose import rules
from benchlib.records import results


def record(params=None, busy=False, epochs=(), **metrics):
    """A dp_vs_ddp record: compute-bound figures unless `metrics` say otherwise."""
    return {"run_id": "r1", "status": "ok", "study": "dp_vs_ddp",
            "params": {"num_workers": 0, "batch_size": 32, "model": "resnet50", **(params or {})},
            "metrics": {"data_s": 0.001, "compute_s": 0.099, "device_type": "cpu", **metrics},
            "details": {"epochs": list(epochs)},
            "host_load": {"busy": busy, "start": {"load_1m": 2.4 if busy else 0.2, "running": 0,
                                                  "cpus": 2}}}


def contended(others, state, cores=2, p90=2, samples=15):
    return {"host_others_running": others, "host_others_running_p90": p90, "host_cores": cores,
            "host_contention_samples": samples, "host_contention": state}


# ------------------------------------------------------------------ the host, during the run

def test_the_contention_during_the_timed_steps_is_judged_not_the_load_at_the_start():
    """The issue's sweep: load 2.4 on 2 cores at the start (partly the previous row's),
    no other task ran during the timed steps: not contended. The reverse, a quiet start
    and 1.3 other tasks on the job's 2 cores through the window: contended."""
    alone = rules.diagnose(record(busy=True, **contended(0.0, "alone", p90=0)))
    assert alone.bottleneck == "compute-bound", alone.text()
    assert ("other tasks runnable on the job's 2 cores during the timed steps: 0.0 on average "
            "(p90 0, 15 samples): alone") in alone.text()
    shared = rules.diagnose(record(**contended(1.3, "contended")))
    assert shared.bottleneck == "host-contended", shared.text()
    assert ("  other tasks runnable on the job's 2 cores during the timed steps: 1.3 on average "
            "(p90 2, 15 samples): contended") in shared.text().splitlines()
    assert "judged from the start" not in shared.text()


def test_a_contended_run_gets_what_its_figures_read_as_its_second_line_and_their_change():
    """Before, "host-contended" left --try nothing to measure on a shared node; now the
    figures' own verdict is the second line, and its advice and change are given beside
    rerunning on a quiet host."""
    quiet = rules.diagnose(record(data_s=0.06, compute_s=0.04))
    shared = rules.diagnose(record(data_s=0.06, compute_s=0.04, **contended(1.3, "contended")))
    assert shared.text().splitlines()[:2] == ["r1: host-contended", "  its figures alone: input-bound"]
    assert shared.try_params == quiet.try_params == {"num_workers": 4}
    assert shared.advice.startswith(f"{rules.QUIET}: its figures include the contention; for "
                                    "what they alone read (input-bound): more DataLoader workers")


def test_a_borderline_contention_is_borderline_with_what_the_figures_read():
    found = rules.diagnose(record(data_s=0.06, compute_s=0.04, **contended(0.7, "borderline")))
    assert found.bottleneck == "borderline: host-contended or input-bound"
    assert found.figures == "input-bound" and found.try_params == {"num_workers": 4}
    assert found.advice.startswith("other tasks ran on the job's 2 cores during the timed "
                                   "steps, 0.35 a core on average: from 0.25 a core the figures "
                                   f"may include them, from 0.50 they do; {rules.QUIET}")


def test_the_compute_of_a_step_is_split_into_forward_and_backward():
    """The issue's slow backward (80 ms in a custom op) read compute-bound with nothing to
    point at: the split is evidence, with DDP's all-reduce named inside backward."""
    found = rules.diagnose(record(compute_s=0.092, forward_s=0.009, backward_s=0.080,
                                  world_size=2))
    assert ("  compute 92 ms a step: forward 9, backward 80 (DDP's all-reduce inside backward), "
            "optimizer and the rest 3") in found.text().splitlines()
    alone = rules.diagnose(record(compute_s=0.092, forward_s=0.009, backward_s=0.080))
    assert "compute 92 ms a step: forward 9, backward 80, optimizer" in alone.text()


# ------------------------------------------------------------------ the point rules' spread

@pytest.mark.parametrize("low, high, verdict", [
    (2.2, 5.0, "start-up-bound"),
    (1.3, 5.0, "borderline: start-up-bound or compute-bound"),
    (1.3, 1.9, "compute-bound"),
])
def test_a_start_up_gap_is_judged_with_its_spread_over_epochs(low, high, verdict):
    """A first epoch that compiled (5x) and two that did not: the gap's median says
    hidden, its epochs straddle STARTUP_GAP: borderline, not start-up-bound."""
    rec = record(samples_per_s=800.0, epoch_samples_per_s=300.0, startup_gap=2.4,
                 startup_hidden=True, startup_gap_low=low, startup_gap_high=high,
                 startup_gap_n=3, first_batch_s=2.0)
    found = rules.diagnose(rec)
    assert found.bottleneck == verdict
    if verdict.startswith("borderline"):
        assert found.advice.startswith(
            f"the start-up gap spans {low:.1f}-{high:.1f}x over 3 epochs, across the 2.0x "
            "threshold: no verdict from this run") and found.try_params == {}


@pytest.mark.parametrize("p10, p90, verdict", [
    (0.45, 0.55, "checkpoint-stalled"),
    (0.30, 0.70, "borderline: checkpoint-stalled or compute-bound"),
])
def test_a_checkpoint_stall_share_is_judged_with_its_spread_over_saves(p10, p90, verdict):
    """6% of the wall time in 12 saves of 0.5 s (100 s): a save's stall from 0.3 to 0.7 s
    gives 3.6%-8.4% for as many saves, across the 5% threshold."""
    rec = record(checkpoint_stall_share=0.06, checkpoint_stall_s=6.0, checkpoints_written=12,
                 checkpoint_blocking_s=0.5, checkpoint_blocking_s_n=12,
                 checkpoint_blocking_s_p10=p10, checkpoint_blocking_s_p90=p90,
                 checkpoint_mode="torch_save")
    found = rules.diagnose(rec)
    assert found.bottleneck == verdict
    low, high = 12 * p10 / 100, 12 * p90 / 100
    assert (f"checkpoint saves stalled training 6.0% of its wall time ({low:.1%}-{high:.1%} at "
            "the p10-p90 of a save's stall) (12 saves, torch_save") in found.text()
    if verdict.startswith("borderline"):
        assert "the checkpoint stall share spans 3.6%-8.4% at the p10-p90 of a save's stall " \
               "(12 saves), across the 5% threshold" in found.advice


def test_a_cuda_step_whose_epochs_straddle_the_launch_threshold_is_borderline():
    epochs = [{"batch_s": s} for s in (0.0015, 0.0019, 0.0024)]
    found = rules.diagnose(record(epochs=epochs, data_s=0.00001, compute_s=0.0019,
                                  batch_s=0.0019, device_type="cuda"))
    assert found.bottleneck == "borderline: launch-bound or compute-bound"
    assert found.advice.startswith("a CUDA step spans 1.50-2.40 ms over 3 epochs, across the "
                                   "2 ms threshold")
    quick = [{"batch_s": s} for s in (0.0012, 0.0015, 0.0018)]
    assert rules.diagnose(record(epochs=quick, data_s=0.00001, compute_s=0.0015, batch_s=0.0015,
                                 device_type="cuda")).bottleneck == "launch-bound"


# ------------------------------------------------------------------ like for like

def stored(run_id, study="dp_vs_ddp", sps=1000.0, **params):
    """A record as the store keeps it (input-bound figures)."""
    return {"run_id": run_id, "study": study, "status": "ok", "table": "t", "notebook": "n",
            "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:01:00+00:00",
            "params": {"model": "simplecnn", "dataset": "mine:build", "batch_size": 32,
                       "device": "cpu", "num_workers": 0, **params},
            "metrics": {"data_s": 0.06, "compute_s": 0.04, "samples_per_s": sps}, "details": {}}


def test_the_same_work_is_judged_on_both_records_parameters():
    """The issue's case: a row with an extra `channels_last: True` matched the diagnosed
    record, which compared only its own keys. Either record's extra parameter is a
    difference; the same keys and values but the knob are the same work."""
    mine = stored("mine0")
    extra = stored("cl4", sps=2300.0, num_workers=4, channels_last=True)
    assert "measured here," not in rules.diagnose(mine, results.frame([mine, extra])).advice
    theirs = stored("mine1", channels_last=True)
    plain = stored("plain4", sps=2300.0, num_workers=4)
    assert "measured here," not in rules.diagnose(theirs, results.frame([theirs, plain])).advice
    same = stored("same4", sps=2300.0, num_workers=4)
    assert "measured here, samples/s: num_workers=4 x2.30 of num_workers=0" in \
        rules.diagnose(mine, results.frame([mine, same])).advice


def compile_row(**params):
    return {"study": "compile", "status": "ok", "run_id": "c1", "started_at": "2026-11-28T10:00",
            "model": "simplecnn", "dataset": "synthetic", "batch_size": 32, "precision": "fp32",
            "device": "cpu", "num_workers": 0, "compile": "default", "compile_cache": "cold",
            "channels_last": False, "ac": "none", "break_even_steps": 120.0, "break_even_low": 80.0,
            "break_even_high": 200.0, "break_even_n": 5, "speedup_verdict": "faster", **params}


def one_process(**params):
    """A compute-bound framework_comparison run of one process, eager."""
    return {"run_id": "fw1", "status": "ok", "study": "framework_comparison",
            "params": {"model": "simplecnn", "dataset": "synthetic", "batch_size": 32,
                       "precision": "fp32", "device": "cpu", "num_workers": 0,
                       "compile": "off", "channels_last": False, "ac": "none", **params},
            "metrics": {"data_s": 0.001, "compute_s": 0.099, "device_type": "cpu",
                        "world_size": 1}, "details": {"epochs": []}}


def test_compile_advice_is_of_every_parameter_world_size_and_strategy_included():
    """A break-even for the same model, data, batch and precision was quoted whatever else
    differed: channels_last, activation checkpointing, model_args, and a DDP run of 2 ranks
    was told a single-process figure."""
    frame = pd.DataFrame([compile_row()])
    assert "pays off after 120 steps" in rules.diagnose(one_process(), frame).advice
    for changed in ({"channels_last": True}, {"ac": "full"}, {"model_args": {"width": 64}}):
        advice = rules.diagnose(one_process(**changed), frame).advice
        assert "not measured here for this work" in advice and "120 steps" not in advice, changed
    ddp = record(params={"model": "simplecnn", "dataset": "synthetic", "strategy": "ddp",
                         "nproc_per_node": 2, "device": "cpu"}, world_size=2)
    advice = rules.diagnose(ddp, pd.DataFrame([compile_row()])).advice
    assert advice.endswith("; torch.compile: not measured here for this run (ddp on 2 ranks): "
                           "notebook 55 times one process, whose break-even is not this run's")


def test_compile_advice_command_measures_the_runs_own_work():
    advice = rules.diagnose(one_process(channels_last=True, ac="full")).advice
    assert ("`python -m benchlib run 55_compile -p model simplecnn -p dataset synthetic -p "
            "batch_size 32 -p precision fp32 -p device cpu -p ac full -p channels_last True`") \
        in advice


# ------------------------------------------------------------------ --try

def test_try_alternates_which_side_launches_first():
    """As the compile study interleaves: a host that drifts favours neither side."""
    assert diagnose_cli.order(1) == [0, 1]
    assert diagnose_cli.order(4) == [0, 1, 1, 0, 0, 1, 1, 0]


def test_try_says_which_launches_shared_the_host():
    original = record(**contended(1.3, "contended"))
    runs = {0: [{"metrics": contended(1.2, "contended")}, {"metrics": contended(0.0, "alone")}],
            1: [{"metrics": contended(0.6, "borderline")}, {"metrics": contended(0.0, "alone")}]}
    assert diagnose_cli.shared(original, runs) == (
        "; the host was shared (other tasks on the job's cores during the timed steps): the "
        "original run contended; as it ran, 1 contended of 2 launches; changed, 1 borderline "
        "of 2 launches")
    quiet = {0: [{"metrics": contended(0.0, "alone")}], 1: [{"metrics": contended(0.0, "alone")}]}
    assert diagnose_cli.shared(record(), quiet) == ""
