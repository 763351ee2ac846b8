"""`benchlib diagnose`: a verdict per run with its evidence and advice. Unit tests feed
records for each verdict and for the borderline between two; constructed runs on the CPU
(2 gloo ranks) are diagnosed as what they were built to be."""

import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from benchlib.analysis import sides
from benchlib.analysis.common import WHOLE_EPOCH_RATE, with_whole_epoch
from benchlib.cli import main
from benchlib.core import envinfo, hostload
from benchlib.diagnose import rules, traces
from benchlib.errors import BenchlibError, ConfigError, LaunchError
from benchlib.launch.launcher import launch
from benchlib.records import results
from benchlib.records.read import read_records


def record(data_s=0.01, compute_s=0.09, rank_steps=None, busy=False, run_id="r1", waits=None,
           **metrics):
    epochs = [{"rank_step_s": rank_steps}] if rank_steps else []
    return {"run_id": run_id, "status": "ok", "study": "dp_vs_ddp", "params": {
        "num_workers": 0, "batch_size": 32, "model": "resnet50", "precision": "fp32"},
        "metrics": {"data_s": data_s, "compute_s": compute_s, "device_type": "cpu", **metrics},
        "details": {"epochs": epochs, **({"rank_comm_exposed_s": waits} if waits else {})},
        "host_load": {"busy": busy, "start": {"load_1m": 3.5 if busy else 0.2, "cpus": 2}}}


@pytest.mark.parametrize("rec, verdict", [
    (record(rank_steps=[0.10, 0.10, 0.10, 0.30]), "straggler"),
    (record(data_s=0.06, compute_s=0.04), "input-bound"),
    (record(data_s=0.0, compute_s=0.10, comm_s=0.06, comm_exposed_s=0.04,
            comm_hidden_fraction=0.33), "communication-bound"),
    (record(alloc_retries=3, ooms=0, peak_reserved_bytes=70 * 2**30), "memory-bound"),
    (record(busy=True), "host-contended"),
    (record(data_s=0.0001, compute_s=0.0009, batch_s=0.001, device_type="cuda"), "launch-bound"),
    (record(data_s=0.001, compute_s=0.099), "compute-bound"),
    (record(samples_per_s=800.0, epoch_samples_per_s=100.0, startup_gap=8.0,
            startup_hidden=True, first_batch_s=2.0), "start-up-bound"),
    # a quarter waiting for data, a quarter all-reduce, half computing: no one thing
    (record(data_s=0.025, compute_s=0.075, comm_s=0.04, comm_exposed_s=0.025), "no single bottleneck"),
])
def test_each_verdict_from_its_evidence(rec, verdict):
    assert rules.diagnose(rec).bottleneck == verdict


def spread(name, value, low, high):
    return {name: value, f"{name}_low": low, f"{name}_high": high}


@pytest.mark.parametrize("name, threshold, verdict, other", [
    ("data_share", rules.INPUT_SHARE, "input-bound", "compute-bound"),
    ("comm_share", rules.COMM_SHARE, "communication-bound", "compute-bound"),
])
def test_a_share_whose_spread_straddles_its_threshold_is_borderline(name, threshold, verdict,
                                                                    other):
    """The same median share, its spread over steps and ranks on one side of the threshold
    or across it: a verdict, or "borderline: X or Y" and no change to try."""
    base = {"data_s": 0.0, "compute_s": 0.1, **spread("compute_share", 0.75, 0.72, 0.78)}
    clear = record(**base, **spread(name, threshold + 0.05, threshold + 0.01, threshold + 0.1))
    across = record(**base, **spread(name, threshold + 0.05, threshold - 0.05, threshold + 0.1))
    below = record(**base, **spread(name, threshold - 0.05, threshold - 0.1, threshold - 0.01))
    assert rules.diagnose(clear).bottleneck == verdict
    found = rules.diagnose(across)
    assert found.bottleneck == f"borderline: {verdict} or {other}" and found.try_params == {}
    assert f"across the {threshold:.0%} threshold: no verdict from this run" in found.advice
    assert rules.diagnose(below).bottleneck == other


def test_a_skew_whose_spread_straddles_the_straggler_threshold_is_borderline():
    """The issue's busy-host case: 2 ranks whose skew varied from step to step around 1.44."""
    rec = record(rank_steps=[0.1, 0.144], **spread("rank_skew", 1.44, 1.1, 1.9))
    rec["details"]["epochs"][0]["rank_own_s"] = [0.1, 0.144]
    rec["metrics"]["data_s"], rec["metrics"]["compute_s"] = 0.0, 0.144
    assert rules.diagnose(rec).bottleneck == "borderline: straggler or compute-bound"
    rec["metrics"].update(spread("rank_skew", 1.44, 1.3, 1.6))
    assert rules.diagnose(rec).bottleneck == "straggler"


def test_each_share_is_printed_with_its_spread():
    rec = record(**spread("data_share", 0.43, 0.41, 0.46), **spread("compute_share", 0.5, 0.48, 0.52))
    assert ("each step: 43% (41%-46%) waiting for data, 50% (48%-52%) computing (95% interval "
            "over steps and ranks)") in rules.diagnose(rec).text()


@pytest.mark.parametrize("rec", [
    record(rank_steps=[0.10, 0.10, 0.10, 0.30]),  # a straggler's figures
    record(data_s=0.001, compute_s=0.099),  # compute-bound's
    record(data_s=0.06, compute_s=0.04),  # input-bound's
])
def test_a_busy_host_is_the_verdict_before_any_other_cause(rec):
    """A record older than the count during the run: the start sample is judged, and says
    so. The figures' own verdict is the second line, its advice and change stand beside
    rerunning on a quiet host (before, --try had no change to measure on a shared host)."""
    quiet = rules.diagnose(rec)
    rec["host_load"] = {"busy": True, "start": {"load_1m": 5.0, "cpus": 2}}
    found = rules.diagnose(rec)
    assert found.bottleneck == "host-contended" and ("host at start: load 5 on 2 cores; no "
                                                     "count during the timed steps in this "
                                                     "record: judged from the start") in found.text()
    assert found.text().splitlines()[1] == f"  its figures alone: {quiet.bottleneck}"
    assert found.advice == (f"{rules.QUIET}: its figures include the contention; for what they "
                            f"alone read ({quiet.bottleneck}): {quiet.advice}")
    assert found.try_params == quiet.try_params


def test_a_window_of_prefetched_batches_draws_no_input_verdict():
    rec = record(data_s=0.06, compute_s=0.04, window_prefetched_only=True, steps=12)
    found = rules.diagnose(rec)
    assert found.bottleneck == "no single bottleneck"  # 60% waiting, but for what?
    assert "held only batches the workers prefetched at start-up (12 steps an epoch)" in found.text()
    rec["metrics"]["window_prefetched_only"] = False
    assert rules.diagnose(rec).bottleneck == "input-bound"


def test_a_start_up_the_steady_rate_hides_is_said_in_words():
    """The issue's slow disk: 1,549 samples/s steady, 150 over the epoch; its first batch
    waited 119 s. Start-up-bound, never compute-bound with amp_bf16 advised."""
    rec = record(data_s=0.002, compute_s=0.098, samples_per_s=1549.0, epoch_samples_per_s=150.0,
                 startup_gap=10.3, startup_hidden=True, first_batch_s=119.0, warmup_s=119.5)
    rec["params"]["num_workers"] = 8
    found = rules.diagnose(rec)
    assert found.bottleneck == "start-up-bound" and "amp_bf16" not in found.advice
    assert ("start-up: first batch after 119 s; 150 samples/s over the whole epoch against "
            "1,549 steady (10.3x); the steady rate hides it") in found.text()
    rec["metrics"].update(window_steps=27, window_samples=864, epoch_samples=960)
    assert ("start-up: first batch after 119 s; 150 samples/s over the whole epoch of 960 "
            "samples against 1,549 steady over 27 steps, 864 samples timed an epoch (10.3x); "
            "the steady rate hides it") in rules.diagnose(rec).text()
    assert "the first batch came after 119 s" in found.advice
    assert "8 workers each read their first batches at once" in found.advice
    # behind a busy host, the start-up is still said in words
    rec["host_load"]["busy"] = True
    found = rules.diagnose(rec)
    assert found.bottleneck == "host-contended" and found.caveat.startswith("start-up hidden")


def test_an_fsdp2_run_whose_collectives_are_untimed_is_never_called_communication_bound():
    rec = record(data_s=0.0, compute_s=0.1,
                 comm_unknown="FSDP2's all-gathers and reduce-scatters are not timed")
    found = rules.diagnose(rec)
    assert found.bottleneck == "borderline: compute-bound or communication-bound"
    assert "communication unknown: FSDP2's all-gathers" in found.text()
    assert found.try_params == {}


def test_communication_advice_says_what_the_measurements_support():
    rec = record(data_s=0.0, compute_s=0.10, comm_s=0.06, comm_exposed_s=0.04,
                 comm_hidden_fraction=0.33, model_params=25_000_000)
    found = rules.diagnose(rec)
    assert found.bottleneck == "communication-bound" and "FSDP2" not in found.advice
    assert "overlap: backward hid 33% of it" in found.advice
    assert "95 MiB of fp32 gradients a step" in found.advice
    assert "fewer all-reduces per sample: batch_size 64; not measured here" in found.advice
    assert found.try_params == {"batch_size": 64}


def test_a_fast_ranks_wait_in_the_all_reduce_is_not_its_own_work():
    """Synchronous DDP: both ranks' steps last 300 ms; rank 0 waited 200 ms of it for rank 1."""
    rec = record(rank_steps=[0.3, 0.3], comm_s=0.21, comm_exposed_s=0.2,
                 waits=[0.2, 0.005])
    found = rules.diagnose(rec)
    assert found.bottleneck == "straggler" and "the slowest (rank 1) 2.95x the others' median" in found.text()
    assert "doctor --health --nproc 2" in found.advice
    assert found.try_params == {}  # how it was launched is not in these params


def test_a_stragglers_advice_runs_doctor_over_the_runs_own_nodes():
    rec = record(rank_steps=[0.1, 0.1, 0.1, 0.3])
    rec["params"].update(launcher="srun", nnodes=2, nproc_per_node=2)
    assert ("`python -m benchlib doctor --health --nproc 2 --launcher srun --nnodes 2` inside "
            "a job of its nodes") in rules.diagnose(rec).advice


@pytest.mark.parametrize("steps, nproc, tried", [
    ([0.1, 0.1, 0.3], 3, {"nproc_per_node": 2}),  # the last rank of the node: leave it out
    ([0.3, 0.1, 0.1], 3, {}),  # one rank fewer would leave out rank 2, not the slow one
    ([0.1, 0.1, 0.3], 1, {}),  # 3 ranks on nodes of 1: fewer per node is none at all
])
def test_a_straggler_is_tried_without_it_only_where_one_rank_fewer_leaves_it_out(
        steps, nproc, tried):
    rec = record(rank_steps=steps)
    rec["params"]["nproc_per_node"] = nproc
    found = rules.diagnose(rec)
    assert found.bottleneck == "straggler" and found.try_params == tried


def stored(run_id, study="dp_vs_ddp", metrics=None, **params):
    """A record as the store keeps it, for a frame of one testbed."""
    return {"run_id": run_id, "study": study, "status": "ok", "table": "t", "notebook": "n",
            "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:01:00+00:00",
            "params": {"model": "simplecnn", "dataset": "mine:build", "batch_size": 32,
                       "device": "cpu", "precision": "fp32", "num_workers": 0, **params},
            "metrics": {"data_s": 0.06, "compute_s": 0.04, "samples_per_s": 1000.0,
                        **(metrics or {})}, "details": {}}


def test_input_advice_measures_only_the_same_work():
    """The issue's case: an input-bound run of simplecnn on the user's data set, and on the
    same testbed a fast IO run of another model and data set with 8 workers: not cited.
    Runs of the same work with 4 workers: cited with n and the verdict's wording."""
    mine = stored("mine0")
    other_io = stored("io8", "single_device_io", {"samples_per_s": 2600.0}, model="toynet",
                      dataset="fashion-mnist", variant="tensorclass_memmap", num_workers=8)
    other_data = stored("theirs4", metrics={"samples_per_s": 5000.0}, dataset="theirs:build",
                        num_workers=4)
    frame = results.frame([mine, other_io, other_data])
    found = rules.diagnose(mine, frame)
    assert found.bottleneck == "input-bound" and "io8" not in found.advice
    assert "theirs4" not in found.advice and "measured here," not in found.advice
    assert found.advice == ("more DataLoader workers (now 0): num_workers=4; not measured here: "
                            "`python -m benchlib diagnose mine0 --try --launches 5` measures it")
    once = results.frame([mine, other_data, stored("mine4", metrics={"samples_per_s": 2300.0},
                                                   num_workers=4)])
    assert ("measured here, samples/s: num_workers=4 x2.30 of num_workers=0 (range 2.30-2.30, "
            "n=1 launch each): no direction from fewer than 5 launches a side"
            in rules.diagnose(mine, once).advice)
    five = [stored(f"a{i}", metrics={"samples_per_s": 1000.0 + 10 * i}) for i in range(5)] + \
        [stored(f"b{i}", metrics={"samples_per_s": 2300.0 + 10 * i}, num_workers=4)
         for i in range(5)]
    text = rules.diagnose(five[0], results.frame(five)).advice
    assert re.search(r"measured here, samples/s: num_workers=4 x2\.2\d over num_workers=0 "
                     r"\(95% CI [\d.]+-[\d.]+, n=5 launches each, beyond the 10% threshold\)",
                     text), text


def test_compute_advice_names_no_parameter_the_study_lacks_and_measures_precision_like_for_like():
    io = stored("io0", "single_device_io", {"data_s": 0.001, "compute_s": 0.099})
    del io["params"]["precision"]  # notebook 10 has no precision
    found = rules.diagnose(io)
    assert found.bottleneck == "compute-bound" and "amp_bf16" not in found.advice
    assert "this study has no precision setting" in found.advice and found.try_params == {}
    fw = [stored("fp32", "framework_comparison", {"data_s": 0.001, "compute_s": 0.099}),
          stored("bf16-other", "framework_comparison", {"samples_per_s": 22_500.0},
                 precision="amp_bf16", model="resnet50", image_size=224),
          stored("fp32-other", "framework_comparison", {"samples_per_s": 1000.0},
                 model="resnet50", image_size=224)]
    fw[0]["params"]["image_size"] = 32
    found = rules.diagnose(fw[0], results.frame(fw))
    assert "22.5" not in found.advice and "a CPU gains from bf16 only with bf16 units" in found.advice
    assert "not measured here: `python -m benchlib diagnose fp32 --try --launches 5`" in found.advice


def test_the_report_column_is_empty_where_there_is_nothing_to_diagnose():
    assert rules.column(record(data_s=0.06, compute_s=0.04)) == "input-bound"
    assert rules.column({**record(), "status": "failed"}) == ""
    assert rules.column({**record(), "study": "data_prep"}) == ""
    assert rules.column({**record(), "study": "no_such_study"}) == ""


@pytest.mark.parametrize("study", ["compile", "memory_and_batch", "single_device_io",
                                   "fault_tolerance", "gpu_check"])
def test_every_study_that_trains_a_model_gets_the_column_as_its_registry_entry_says(study):
    """The studies whose config builds a model (the registry's, not a list of names), and
    the GPU check's steps: notebook 55's and 15's rows too."""
    assert rules.column({**record(data_s=0.06, compute_s=0.04), "study": study}) == "input-bound"


def search(*trials):
    """A largest-batch search over `trials` (batch, fits, step_s, alloc_retries), its
    record's step figures as notebook 15 keeps them (studies.memory_and_batch.step_figures)."""
    from benchlib.studies import batch_search, memory_and_batch

    found = batch_search.Search(run=None, limit=2**30)
    found.order = [{"batch_size": b, "fits": fits, "step_s": step, "alloc_retries": retries,
                    "ooms": 0 if retries is not None else None, "peak_bytes": 2**20,
                    "device_total_bytes": 2**30 if retries is not None else None}
                   for b, fits, step, retries in trials]
    largest = max((t["batch_size"] for t in found.order if t["fits"]), default=None)
    return {"run_id": "m1", "status": "ok", "study": "memory_and_batch",
            "params": {"model": "resnet50", "precision": "fp32", "dataset": "synthetic"},
            "metrics": {"largest_batch": largest, **memory_and_batch.step_figures(found, largest)},
            "details": {"trials": found.order}, "host_load": {"busy": False, "start": {}}}


def test_a_largest_batch_search_is_judged_by_the_steps_of_its_largest_batch_that_fits():
    """A trial's batch is made on the device once: no step waits for data, so the largest
    batch's steps are compute (or, on CUDA, the allocator retrying near the edge: memory);
    no batch that fits: nothing to judge, and the reason said where the verdict would be."""
    cpu = search((8, True, 0.20, None), (16, True, 0.40, None), (16, True, 0.44, None),
                 (32, False, None, None))
    d = rules.diagnose(cpu)
    assert d.bottleneck == rules.column(cpu) == "compute-bound"
    assert cpu["metrics"]["compute_s"] == pytest.approx(0.42)  # batch 16's median, not 8's
    assert d.evidence[0] == ("steps of batch 16, the largest that fits (median of 2 processes; "
                             "its batch made on the device once: no data wait)")
    edge = search((1024, True, 0.3, 0), (1700, True, 0.5, 4), (1701, False, None, 0))
    assert rules.column(edge) == "memory-bound"
    assert "the allocator retried 4 times" in rules.diagnose(edge).advice
    none = search((2, False, None, None))
    assert rules.column(none) == "" and rules.why_not(none) == \
        "no batch fits, so no trial's steps to judge"
    assert rules.why_not({**record(), "study": "data_prep", "metrics": {}}) == \
        "not a training run with step times (data_prep)"


# ------------------------------------------------------------------ constructed runs

def launched(folder, module, params, nproc, run_id="constructed"):
    """One launch written as a record under `folder`/out, the host recorded as quiet (the
    case as built, not the suite's neighbours); the outputs folder."""
    return recorded(folder / "out", params, ran(folder, module, params, nproc), run_id=run_id)


def ran(folder, module, params, nproc):
    """One launch, its logs under `folder`/logs: when it started and how it ended (a launch
    that fails ends failed, with the launcher's error). 2 ranks start under the tcp
    launcher, one process a rank: no test here is about the launcher, and a torchrun agent
    would cost 2 CPU seconds more."""
    started_at = results.now()
    worker = {k: v for k, v in params.items() if k != "strategy"}  # the worker's own name
    try:
        out = launch(module, {"device": "cpu", "log_interval": 0, **worker}, folder / "logs",
                     "tcp" if nproc > 1 else "single", nproc, timeout_s=300)
        done = {"status": "ok", "metrics": out.result["metrics"], "details": out.result["details"]}
    except LaunchError as e:
        done = {"status": "failed", "error": {"type": "LaunchError", "message": str(e)}}
    return started_at, done


def recorded(out, params, run, host_load=None, run_id="constructed"):
    """`run` (from `ran`) as a record in `out`/results, with `host_load` as sampled around
    it and the other tasks counted during its timed steps, else the host recorded as quiet
    (the case as built, not the suite's neighbours: its count during the run left out);
    `out`."""
    started_at, done = run
    if host_load is None and done.get("metrics"):
        done = {**done, "metrics": {k: v for k, v in done["metrics"].items()
                                    if not k.startswith(("host_others", "host_contention",
                                                         "host_cores"))}}
    rec = results.make_record(run_id=run_id, table="t", notebook="20_dp_vs_ddp.ipynb",
                              params=params, env=envinfo.collect(), started_at=started_at,
                              host_load=host_load or {"busy": False, "start": {}}, **done)
    results.write_record(out / "results", rec)
    return out


def diagnose_text(capsys, out, run_id="constructed", *flags) -> str:
    capsys.readouterr()
    assert main(["diagnose", run_id, *flags, "--outputs", str(out)]) == 0
    return capsys.readouterr().out


def diagnosed(tmp_path, monkeypatch, capsys, module, params, nproc):
    """One launch written as a record, then `benchlib diagnose` on it: its printed lines."""
    return diagnose_text(capsys, launched(tmp_path, module, params, nproc))


@contextlib.contextmanager
def busy_loops(n: int):
    """`n` processes spinning (one per core) until the block ends, at the lowest priority:
    the flag counts tasks on the run queue whatever their priority, and the run beside
    them still takes seconds (at full priority a launch took 22 s here, not 4)."""
    loops = [subprocess.Popen([sys.executable, "-c", "import os; os.nice(19)\nwhile True: pass"])
             for _ in range(n)]
    try:
        time.sleep(0.5)  # each started and on the run queue
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


SLOWED = {"model": "simplecnn", "dataset": "synthetic", "image_size": 32, "batch_size": 8,
          "epochs": 1, "max_steps": 12, "warmup_steps": 2, "inject_step_delay_ms": 150.0,
          "delay_rank": 1}


@pytest.fixture(scope="module")
def slowed_rank(tmp_path_factory):
    """Rank 1 of 2 slowed 150 ms a step, launched twice: recorded as on a quiet host (the
    case as built), and launched beside a busy loop on every core the job may use, through
    its timed steps (whose other tasks rank 0 counts: hostload.Contention), its load sampled
    as a row's is (start and end). The busy case's 10 timed steps of 150 ms give its
    sampler (every 0.5 s or more) a few samples; the loops run at the lowest priority, so
    they take what the ranks leave (a second launch with them cost about 10 CPU s)."""
    root = tmp_path_factory.mktemp("slowed")
    quiet = ran(root / "quiet", "ddp", SLOWED, nproc=2)
    with busy_loops(hostload.job_cores()):
        start = hostload.sample()
        busy = ran(root / "busy", "ddp", SLOWED, nproc=2)
        busy_load = hostload.span(start, hostload.sample())
    return recorded(root / "quiet", SLOWED, quiet), recorded(root / "busy", SLOWED, busy, busy_load)


@pytest.mark.distributed
def test_a_rank_slowed_on_a_quiet_host_is_named_the_straggler_with_its_spread(slowed_rank,
                                                                             capsys):
    text = diagnose_text(capsys, slowed_rank[0])
    assert "constructed: straggler" in text, text
    skew = re.search(r"the slowest \(rank 1\) ([\d.]+)x the others' median \(([\d.]+)-([\d.]+) "
                     r"over steps\)", text)
    assert skew and float(skew[2]) >= rules.STRAGGLER, text


@pytest.mark.distributed
def test_the_same_slowed_rank_on_a_busy_host_is_host_contended_first(slowed_rank, capsys):
    """The issue's 2 ranks at load 5, called a straggler and sent to doctor --health with
    the busy host as a caveat: the busy host is the verdict, counted during the timed steps
    (the loops, not the run's own ranks), and the straggler what its figures alone read,
    the second line, with its advice beside rerunning on a quiet host."""
    text = diagnose_text(capsys, slowed_rank[1])
    print(text)
    assert text.splitlines()[:2] == ["constructed: host-contended",
                                     "  its figures alone: straggler"], text
    assert "rerun on a quiet host" in text and "doctor --health" in text
    during = re.search(r"  other tasks runnable on the job's (\d+) cores during the timed steps: "
                       r"([\d.]+) on average \(p90 \d+, (\d+) samples\): contended", text)
    assert during and int(during[3]) >= 1, text
    assert float(during[2]) >= hostload.CONTENDED * int(during[1]), text  # the loops, at least


SLOW_START = """import os
import time

import torch
from torch.utils.data import Dataset

READS = {}


class SlowStart(Dataset):
    \"\"\"Slow storage with a cold cache: each process's first 4 reads take 0.5 s, the
    rest nothing.\"\"\"

    def __len__(self):
        return 128

    def __getitem__(self, i):
        READS[os.getpid()] = READS.get(os.getpid(), 0) + 1
        if READS[os.getpid()] <= 4:
            time.sleep(0.5)
        return torch.zeros(3, 8, 8), i % 10


def build():
    return SlowStart()
"""
WIDE_NET = ("from torch import nn\n\ndef build():\n    return nn.Sequential(nn.Flatten(), "
            "nn.Linear(3 * 32 * 32, 1024), nn.ReLU(), nn.Linear(1024, 10))\n")
TINY_HEAD = ("from torch import nn\n\ndef build():\n    return nn.Sequential("
             "nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 10))\n")


@pytest.fixture(scope="module")
def own_code(tmp_path_factory):
    """The modules of the built cases (a model that costs nothing, a wide one, data sets of
    the user's) importable here and in every rank."""
    folder = tmp_path_factory.mktemp("own")
    (folder / "tinyhead.py").write_text(TINY_HEAD)
    (folder / "widenet.py").write_text(WIDE_NET)
    (folder / "slowstart.py").write_text(SLOW_START)
    (folder / "badrow.py").write_text(
        "import torch\n\nclass Rows(torch.utils.data.Dataset):\n    def __len__(self):\n"
        "        return 320\n\n    def __getitem__(self, i):\n        if i == 280:\n"
        "            raise ValueError('row 280 has 3 columns, not 4')\n"
        "        return torch.zeros(3, 8, 8), i % 10\n\ndef build():\n    return Rows()\n")
    (folder / "slowread.py").write_text(
        "import time\n\nimport torch\nfrom torch.utils.data import Dataset\n\n\n"
        "class SlowRead(Dataset):\n    def __len__(self):\n        return 128\n\n"
        "    def __getitem__(self, i):\n        time.sleep(0.02)  # a read from slow storage\n"
        "        return torch.zeros(3, 8, 8), i % 10\n\n\ndef build():\n    return SlowRead()\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", f"{folder}:{os.environ.get('PYTHONPATH', '')}")
        mp.syspath_prepend(str(folder))
        yield folder


@pytest.fixture(scope="module")
def slow_start(tmp_path_factory, own_code):
    """2 workers each reading their first 4 items at 0.5 s: a first batch after 2 s, then
    an epoch whose every other step takes milliseconds."""
    params = {"model": "tinyhead:build", "dataset": "slowstart:build", "batch_size": 4,
              "num_workers": 2, "epochs": 1, "warmup_steps": 1}
    return launched(tmp_path_factory.mktemp("slowstart"), "single", params, nproc=1)


@pytest.mark.distributed
def test_a_slow_start_read_by_several_workers_is_a_figure_and_the_verdict(slow_start, capsys):
    """Before: the first step was left out as warm-up and nothing said so; the record gave
    the steady rate alone, and diagnose judged the fast steps after it."""
    rec = results.find_record(slow_start / "results", "t", "constructed")
    m = rec["metrics"]
    assert m["first_batch_s"] >= 2.0, m  # 4 reads of 0.5 s in each worker
    assert m["epoch_samples_per_s"] * rules.STARTUP_GAP < m["samples_per_s"], m
    assert m["startup_hidden"] is True and m["startup_note"].startswith(
        "start-up hidden by the steady rate: ")
    text = diagnose_text(capsys, slow_start)
    print(text)
    assert "constructed: start-up-bound" in text
    assert re.search(r"start-up: first batch after [\d.]+ s; [\d,]+ samples/s over the whole "
                     r"epoch of 128 samples against [\d,]+ steady over [\d,]+ steps, [\d,]+ "
                     r"samples timed an epoch \([\d.]+x\); the steady rate hides it", text), text
    assert "2 workers each read their first batches at once" in text


@pytest.mark.distributed
def test_a_rank_whose_data_raises_says_the_error_and_diagnose_prints_it_with_the_log(
        tmp_path, own_code, capsys):
    """Item 280 of the user's data raises inside a DataLoader worker (the preflight's scan
    of items 0 to 255 passed): the launch's error names the ValueError, not only the exit
    code; the rank's terminal gets its last line; diagnose prints the error and the log."""
    out = launched(tmp_path, "single", {"model": "tinyhead:build", "dataset": "badrow:build",
                                        "batch_size": 8, "num_workers": 2, "epochs": 1}, nproc=1)
    rec = results.find_record(out / "results", "t", "constructed")
    message = rec["error"]["message"]
    assert rec["status"] == "failed" and "ValueError: row 280 has 3 columns, not 4" in message
    assert message.endswith(f"log: {tmp_path / 'logs' / 'rank0.log'}"), message
    assert "benchlib.workers.single: rank 0: ValueError: row 280 has 3 columns, not 4" in \
        (tmp_path / "logs" / "launcher.log").read_text()
    text = diagnose_text(capsys, out)
    assert text.startswith("constructed: failed (dp_vs_ddp): rank 0 on ")
    assert f"  log: {tmp_path / 'logs' / 'rank0.log'}\n" in text


@pytest.fixture(scope="module")
def io_runs(tmp_path_factory, small_data):
    """`benchlib io` on two data sets: fashion-mnist with no workers (decoding in the loop:
    input-bound) and mydataset with 2; then, in a second outputs folder holding both, the
    same fashion-mnist work with 2 workers."""
    root = tmp_path_factory.mktemp("io")
    flags = ["io", "1", "cpu", "--path", str(small_data), "--variant", "raw", "--mode",
             "traverse", "--repeats", "1", "--batch-size", "32"]
    crossed, same = root / "crossed", root / "same"
    # a command run here with --outputs sets BENCHLIB_OUTPUTS for this process: put back
    # after, or every other module's test on this worker would resolve outputs/ in here
    before = os.environ.get("BENCHLIB_OUTPUTS")
    try:
        for table, dataset, workers in (("fashion0", "fashion-mnist", 0),
                                        ("mine2", "mydataset", 2)):
            assert main([*flags, "--dataset", dataset, "--num-workers", str(workers), "--table",
                         table, "--outputs", str(crossed)]) == 0
        shutil.copytree(crossed, same)
        assert main([*flags, "--dataset", "fashion-mnist", "--num-workers", "2", "--table",
                     "fashion2", "--outputs", str(same)]) == 0
    finally:
        if before is None:
            os.environ.pop("BENCHLIB_OUTPUTS", None)
        else:
            os.environ["BENCHLIB_OUTPUTS"] = before
    for record_file in [*crossed.glob("results/*/*.json"), *same.glob("results/*/*.json")]:
        rec = json.loads(record_file.read_text())  # the case as built, not the suite's neighbours
        record_file.write_text(json.dumps({**rec, "host_load": {"busy": False, "start": {}}}))
    ids = {r["table"]: r["run_id"] for r in read_records(same / "results")}
    return crossed, same, ids


def test_advice_from_io_runs_of_another_data_set_does_not_cross(io_runs, capsys):
    crossed, same, ids = io_runs
    text = diagnose_text(capsys, crossed, ids["fashion0"])
    print(text)
    assert f"{ids['fashion0']}: input-bound" in text and ids["mine2"] not in text
    assert "num_workers=4; not measured here: `python -m benchlib diagnose" in text
    text = diagnose_text(capsys, same, ids["fashion0"])
    assert ids["mine2"] not in text
    # (whole-epoch rates where the 2 workers' start-up was more than half their epoch)
    assert re.search(r"measured here, (whole-epoch )?samples/s[^:]*: num_workers=2 x[\d.]+ of "
                     r"num_workers=0 \(range "
                     r"[\d.]+-[\d.]+, n=1 launch each\): no direction from fewer than 5 launches "
                     r"a side", text), text


@pytest.fixture(scope="module")
def slowed_all_reduce(tmp_path_factory, own_code):
    """A slower link made on purpose, as the straggler test makes a slower rank: 2 DDP
    ranks of a wide model (widenet) whose every step's last gradient bucket waits 200 ms
    inside its all-reduce, traced (export_trace); its outputs and log folders. One launch
    serves the communication-bound verdict and the traces: the traced steps run after the
    timed epochs and after the all-reduce's figures are taken (trainers.ddp's _trace), so
    tracing moves no figure the verdict reads, and what the trace test reads (a trace per
    rank, its rank and marked steps, diagnose's line on them) holds for any model."""
    folder = tmp_path_factory.mktemp("allreduce")
    out = launched(folder, "ddp", {
        "model": "widenet:build", "dataset": "synthetic", "input_shape": "3x32x32",
        "batch_size": 2, "epochs": 1, "max_steps": 6, "warmup_steps": 2,
        "inject_comm_delay_ms": 200.0, "export_trace": True}, nproc=2)
    return out, folder / "logs"


@pytest.mark.distributed
def test_a_traced_ddp_run_leaves_a_kineto_trace_per_rank_that_hta_reads(slowed_all_reduce,
                                                                       capsys):
    """export_trace: a trace per rank in the launch's log folder, named as HTA's
    TraceAnalysis(trace_dir=...) finds them (the rank in distributedInfo, the steps marked);
    a CPU trace holds no GPU kernels, which is what HTA's breakdowns read."""
    out, logs = slowed_all_reduce
    text = diagnose_text(capsys, out)
    folder = logs / "trace"
    assert sorted(p.name for p in folder.iterdir()) == ["rank0.json", "rank1.json"]
    for rank in (0, 1):
        trace = json.loads((folder / f"rank{rank}.json").read_text())
        assert trace["distributedInfo"]["rank"] == rank
        assert trace["distributedInfo"]["world_size"] == 2
        marked = {e["name"] for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")}
        assert {"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"} <= marked
    assert (f"  traces: 2 rank traces in {folder} hold no GPU kernels; HTA's temporal and "
            "overlap breakdowns are for CUDA runs, the figures above are benchlib's own") in text
    if importlib.util.find_spec("hta"):  # why diagnose does not ask HTA (the traces extra)
        with pytest.raises(BenchlibError, match="IndexError"):  # its temporal breakdown
            traces.breakdown_in_subprocess(folder)


@pytest.mark.distributed
def test_an_all_reduce_slowed_on_purpose_is_communication_bound(slowed_all_reduce, capsys):
    """Each step's last gradient bucket waits 200 ms inside its all-reduce, where backward
    has nothing left to hide it. The model's own all-reduce was not enough to build the
    case on: 25M parameters on a batch of 2 put it at 26 to 45% of a step by the suite's
    load, on both sides of COMM_SHARE (30%), because the step's compute is passes over the
    same 100 MB."""
    text = diagnose_text(capsys, slowed_all_reduce[0])
    assert "constructed: communication-bound" in text and "not hidden by backward" in text
    # at least the delay of each step went unhidden
    exposed = re.search(r"all-reduce ([\d.]+) ms a step, ([\d.]+) ms of it not hidden", text)
    assert exposed and float(exposed.group(2)) >= 200, text


def test_a_negative_comm_delay_is_refused_naming_the_flag():
    from benchlib.trainers import ddp_flags

    args = ddp_flags.parser("ddp").parse_args(["--inject-comm-delay-ms=-5"])
    with pytest.raises(ConfigError, match=r"^inject_comm_delay_ms: must be >= 0, got -5.0$"):
        ddp_flags.check_args(args)


@pytest.mark.distributed
def test_resnet50_on_synthetic_data_is_compute_bound(tmp_path, monkeypatch, capsys):
    text = diagnosed(tmp_path, monkeypatch, capsys, "single", {
        "model": "resnet50", "dataset": "synthetic", "image_size": 64, "batch_size": 8,
        "epochs": 1, "max_steps": 4, "warmup_steps": 1, "precision": "fp32"}, nproc=1)
    assert "constructed: compute-bound" in text and "mixed precision" in text
    assert "not measured here: `python -m benchlib diagnose constructed --try" in text


@pytest.mark.distributed
def test_jpegs_decoded_in_the_training_process_are_input_bound(tmp_path, monkeypatch, capsys,
                                                              small_data):
    """A model that costs next to nothing (pool, then a linear layer) on 224px JPEGs decoded
    and augmented in the training process (no DataLoader workers)."""
    (tmp_path / "tinyhead.py").write_text(
        "from torch import nn\n\ndef build():\n    return nn.Sequential(nn.AdaptiveAvgPool2d(1), "
        "nn.Flatten(), nn.Linear(3, 10))\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    text = diagnosed(tmp_path, monkeypatch, capsys, "single", {
        "model": "tinyhead:build", "dataset": "imagefolder", "path": str(small_data),
        "image_size": 224, "batch_size": 8, "num_workers": 0, "epochs": 1, "max_steps": 5,
        "warmup_steps": 1}, nproc=1)
    assert "constructed: input-bound" in text and "more DataLoader workers (now 0)" in text


def test_an_unknown_run_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    assert main(["diagnose", "nope", "--outputs", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs: no record has run id or label 'nope'" in err[0]


@pytest.mark.notebook
def test_try_relaunches_the_row_beside_the_change_and_names_no_direction_from_one_launch(
        tmp_path, own_code, capsys):
    """An input-bound notebook-20 row (a model that costs nothing, on a data set whose every
    item waits 20 ms for slow storage), then `diagnose --try`: the row as it ran and the
    row with 4 workers, launched in turn, their records side by side; the sentence gives
    the ratio with its range and n, and no direction from one launch a side. Its window
    (24 steps, 8 of them prefetched by 4 workers) is longer than what they prefetch. The
    row ran on a shared host (its count of other tasks during the timed steps says
    contended): --try measures what its figures alone suggest, and says the host was
    shared (before: "no change to measure")."""
    params = {"strategy": "single", "nproc_per_node": 1, "model": "tinyhead:build",
              "dataset": "slowread:build", "batch_size": 4, "num_workers": 0, "max_steps": 24,
              "warmup_steps": 2, "epochs": 2, "device": "cpu"}
    out = launched(tmp_path, "single", params, nproc=1)
    [kept] = list((out / "results").glob("*/*.json"))
    rec = json.loads(kept.read_text())
    rec["metrics"].update(host_others_running=1.3, host_others_running_p90=2, host_cores=2,
                          host_contention_samples=15, host_contention="contended")
    kept.write_text(json.dumps(rec))
    text = diagnose_text(capsys, out, "constructed", "--try")
    print(text)
    assert text.startswith("constructed: host-contended\n  its figures alone: input-bound\n")
    [line] = [li for li in text.splitlines() if li.startswith("  try num_workers=4 (1 launch a side")]
    assert ("; the host was shared (other tasks on the job's cores during the timed steps): the "
            "original run contended") in line
    frame = results.load_results(out / "results")
    tried = frame[frame["table"] == "t_try"].sort_values("started_at")
    assert list(tried["num_workers"]) == [0, 4]  # the row as it ran first, then the change
    # whole-epoch rates where a side's steady rate hid its start-up (4 workers starting,
    # here), of the data set's epoch: 24 of its 32 steps ran, the rest projected
    col = WHOLE_EPOCH_RATE if "whole-epoch samples/s" in line else "samples_per_s"
    tried = with_whole_epoch(tried)
    low, high, what = sides.interval(
        sides.side("num_workers=4", tried[tried["num_workers"] == 4], col),
        sides.side("as it ran", tried[tried["num_workers"] == 0], col))
    ratio = re.search(r"num_workers=4 x([\d.]+) of as it ran \(range ([\d.]+)-([\d.]+), n=1 "
                      r"launch( \(2 epochs\))? each\): no direction from fewer than 5 launches",
                      line)
    assert ratio and f"{low:.2f}" == ratio[2] and f"{high:.2f}" == ratio[3], line
    assert float(ratio[1]) > 1.5, line  # waits overlap in 4 workers without needing a core
    assert "no clear difference" not in line


def test_try_refuses_a_window_of_prefetched_batches_before_launching(tmp_path, capsys):
    """The issue's --try: 10 timed steps, all prefetched by 8 workers at start-up."""
    rec = results.make_record(
        run_id="r8", table="t", notebook="20_dp_vs_ddp.ipynb", env=envinfo.collect(),
        params={"strategy": "single", "model": "simplecnn", "dataset": "synthetic",
                "num_workers": 4, "max_steps": 12, "device": "cpu"},
        started_at=results.now(), status="ok",
        metrics={"data_s": 0.06, "compute_s": 0.04, "samples_per_s": 10.0}, details={},
        host_load={"busy": False, "start": {}})
    results.write_record(tmp_path / "results", rec)
    text = diagnose_text(capsys, tmp_path, "r8", "--try")
    assert ("  try num_workers=8: refused: the original row would time only prefetched "
            "batches: 4 workers prefetch 8 batches at start-up") not in text
    assert ("try num_workers=8: refused: num_workers=8 would time only prefetched batches: "
            "8 workers prefetch 16 batches at start-up, and max_steps 12 times no other") in text
    assert not (tmp_path / "runs").exists()


def test_a_steps_all_reduce_is_the_union_of_its_buckets_and_the_tail_after_the_last_launch():
    """Buckets in flight 0-50 ms and 20-80 ms overlap (80 ms of communication), a third
    runs 100-130 ms: 110 ms in all; the last launched at 100 ms, so 30 ms nothing hid."""
    from benchlib.distributed.comm_timer import CommTimer

    timer = CommTimer()
    timer.intervals = [(0.0, 0.05), (0.02, 0.08), (0.1, 0.13)]
    timer.step_end()
    comm, exposed = timer.steps[0]
    assert comm == pytest.approx(0.11) and exposed == pytest.approx(0.03)
    assert timer.figures(0) == pytest.approx({"comm_s": 0.11, "comm_exposed_s": 0.03,
                                              "comm_hidden_fraction": 1 - 0.03 / 0.11})


def test_a_rank_that_only_waited_makes_no_division_by_zero():
    rec = record(rank_steps=[0.1, 0.1], waits=[0.1, 0.0])  # rank 0's own work: 0 ms
    assert "the slowest (rank 1)" in rules.diagnose(rec).text()


@pytest.mark.parametrize("share, mode, verdict, tried", [
    (0.08, "torch_save", "checkpoint-stalled", {"checkpoint": "dcp_async"}),
    (0.08, "dcp_async", "checkpoint-stalled", {"checkpoint_every": 8}),
    (0.04, "torch_save", "compute-bound", {"precision": "amp_bf16"}),  # under 5%: named, no more
])
def test_checkpoint_stalls_over_5_percent_of_the_wall_time_are_the_finding(share, mode, verdict,
                                                                           tried):
    """A compute-bound run whose saves stall it 8% of its wall time: the stall is what to
    act on; at 4% it stays evidence beside the compute-bound verdict."""
    rec = record(data_s=0.001, compute_s=0.099, checkpoint_stall_share=share,
                 checkpoint_mode=mode, checkpoints_written=12, checkpoint_blocking_s=0.8)
    rec["params"]["checkpoint_every"] = 4
    d = rules.diagnose(rec)
    assert d.bottleneck == verdict and d.try_params == tried
    assert f"checkpoint saves stalled training {share:.1%} of its wall time (12 saves, {mode}" \
        in "\n".join(d.evidence)
    if verdict == "checkpoint-stalled":
        assert "project --mtbf 12h --checkpoint-run r1" in d.advice
