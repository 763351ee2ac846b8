import math
import os
import statistics
import time

import pytest
import torch
from torch.utils.data import DataLoader

from benchlib.core import loops
from benchlib.core.models import ToyNet, build_model
from benchlib.data import storage


def test_toynet_is_seed_000s_mlp():
    model = ToyNet()
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(784, 512), (512, 512), (512, 10)]
    assert model(torch.rand(3, 1, 28, 28)).shape == (3, 10)
    assert build_model("simplecnn")(torch.rand(2, 1, 28, 28)).shape == (2, 10)


def _loader(small_data, batch_size=64):
    prepared = storage.prepare("fashion-mnist", "preload", small_data)
    return loops.make_loader(prepared.dataset, prepared.collate_fn, batch_size, 0,
                             torch.device("cpu"), seed=0)


SLEEP_S = 0.02  # a known cost, far above what a traverse step or the loop itself takes


def _slow(collate_fn):
    """The data set's own collate, then a known wait: every batch costs >= SLEEP_S to load."""
    def collate(batch):
        out = collate_fn(batch)
        time.sleep(SLEEP_S)
        return out
    return collate


class SlowNet(torch.nn.Module):
    """ToyNet whose forward also waits SLEEP_S: every train step computes >= SLEEP_S."""

    def __init__(self):
        super().__init__()
        self.net = ToyNet()

    def forward(self, x):
        time.sleep(SLEEP_S)
        return self.net(x)


def test_an_epoch_times_every_step_and_flags_warmup(small_data):
    prepared = storage.prepare("fashion-mnist", "preload", small_data)
    loader = loops.make_loader(prepared.dataset, _slow(prepared.collate_fn), 64, 0,
                               torch.device("cpu"), seed=0)
    times = loops.run_epoch(loader, loops.Stepper("traverse", torch.device("cpu")), warmup_steps=3)
    assert len(times.samples) == math.ceil(600 / 64) and sum(times.samples) == 600
    assert times.warmup == [True] * 3 + [False] * (len(times.samples) - 3)
    data_s, compute_s, samples = times.timed()
    assert len(data_s) == len(compute_s) == len(samples) == len(times.samples) - 3
    # the known load time lands in every step's data time, none in its compute time
    assert all(t >= SLEEP_S for t in times.data_s)
    assert statistics.median(times.compute_s) < SLEEP_S / 2
    # every batch's load is inside a step: what the steps leave out of the epoch (the
    # loop's own bookkeeping, microseconds) is less than one batch's known load
    assert 0 <= times.epoch_s - (sum(times.data_s) + sum(times.compute_s)) < SLEEP_S
    assert times.loss_first is None  # traverse does not train


def test_a_train_step_times_its_compute_not_its_data(small_data):
    step = loops.Stepper("train", torch.device("cpu"), SlowNet())
    threads = torch.get_num_threads()
    # one thread: with two on 2 loaded cores, an op after a sleep waited 50-80 ms for the
    # pool's second thread to be scheduled, which would blur data time and compute time
    torch.set_num_threads(1)
    try:
        times = loops.run_epoch(_loader(small_data), step, warmup_steps=0)
    finally:
        torch.set_num_threads(threads)
    assert len(times.compute_s) == math.ceil(600 / 64)
    assert all(t >= SLEEP_S for t in times.compute_s)  # the forward's known wait
    assert statistics.median(times.data_s) < SLEEP_S / 2  # preloaded: no wait to load
    assert times.loss_first is not None


def test_training_learns_the_generated_classes(small_data):
    torch.manual_seed(0)
    step = loops.Stepper("train", torch.device("cpu"), ToyNet(), lr=0.1)
    first = loops.run_epoch(_loader(small_data, 32), step, warmup_steps=0)
    for _ in range(3):
        last = loops.run_epoch(_loader(small_data, 32), step, warmup_steps=0)
    assert last.loss_last < 0.5 * first.loss_first


def test_profiler_reports_top_operators_and_writes_a_trace(small_data, tmp_path):
    step = loops.Stepper("train", torch.device("cpu"), ToyNet())
    rows = loops.profile_steps(_loader(small_data), step, steps=3, trace_file=tmp_path / "t.json")
    names = [r["op"] for r in rows]
    assert any("addmm" in n or "linear" in n for n in names)
    assert rows == sorted(rows, key=lambda r: r["self_cpu_ms"], reverse=True)
    assert '"traceEvents"' in (tmp_path / "t.json").read_text()


def test_batched_data_is_fetched_by_index_tensors_every_sample_once_per_epoch(small_data):
    prepared = storage.prepare("fashion-mnist", "preload_batched", str(small_data))
    loader = loops.make_loader(prepared.dataset, prepared.collate_fn, 64, 0, torch.device("cpu"), 3)
    assert isinstance(loader.sampler, loops.IndexBatches) and len(loader) == math.ceil(600 / 64)
    epochs = []
    for _ in range(2):
        batches = list(loader)
        assert [len(y) for _, y in batches] == [64] * 9 + [24]
        assert batches[0][0].shape == (64, 1, 28, 28)
        epochs.append(torch.cat([y for _, y in batches]))
        # the same samples as the data set, each once: labels sorted match
        assert torch.equal(epochs[-1].sort().values, prepared.dataset.labels.sort().values)
    assert not torch.equal(epochs[0], epochs[1])  # shuffled again each epoch
    again = loops.make_loader(prepared.dataset, prepared.collate_fn, 64, 0, torch.device("cpu"), 3)
    assert torch.equal(torch.cat([y for _, y in again]), epochs[0])  # seeded: reproducible


def test_the_lean_loader_gives_the_dataloaders_batches_in_its_order(small_data):
    prepared = storage.prepare("fashion-mnist", "preload_batched", str(small_data))
    cpu = torch.device("cpu")
    plain = loops.make_loader(prepared.dataset, prepared.collate_fn, 64, 0, cpu, 5)
    lean = loops.make_loader(prepared.dataset, prepared.collate_fn, 64, 0, cpu, 5, lean=True)
    assert isinstance(plain, DataLoader) and isinstance(lean, loops.BatchLoader)
    assert len(lean) == len(plain) == math.ceil(600 / 64)
    for _ in range(2):  # each epoch reshuffled alike
        pairs = list(zip(plain, lean, strict=True))
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in pairs)
    # with workers, a DataLoader still feeds them
    assert isinstance(loops.make_loader(prepared.dataset, prepared.collate_fn, 64, 1, cpu, 5,
                                        lean=True), DataLoader)


def test_batches_prefetched_during_start_up_are_left_out_and_the_record_says_so(small_data):
    """A slow first step lets 2 x num_workers batches pile up; they then arrive for free.
    (Shown by timing only on a quiet machine, so the test checks the rule and its use.)"""
    from benchlib.config import SingleDeviceIoConfig
    from benchlib.studies import single_device_io

    assert loops.steady_state_warmup(1, 0) == (1, "warmup_steps")
    assert loops.steady_state_warmup(9, 2) == (9, "warmup_steps")
    warmup, why = loops.steady_state_warmup(1, 2)
    assert warmup == 4 and why.startswith("4 batches prefetched by 2 workers during start-up")
    cfg = SingleDeviceIoConfig(path=str(small_data), dataset="fashion-mnist", variant="preload", mode="traverse",
                   device="cpu", repeats=1, warmup_steps=1, num_workers=2)
    m = single_device_io.run(cfg).metrics
    assert m["warmup_steps_excluded"] == 4 and m["warmup_reason"] == why


def test_profiling_on_cpu_puts_no_kineto_lines_on_stderr():
    import subprocess
    import sys

    code = ("import torch\nfrom benchlib.core import loops\nfrom benchlib.core.models import ToyNet\n"
            "ds = torch.utils.data.TensorDataset(torch.rand(32, 1, 28, 28), "
            "torch.randint(0, 10, (32,)))\n"
            "step = loops.Stepper('train', torch.device('cpu'), ToyNet())\n"
            "rows = loops.profile_steps(torch.utils.data.DataLoader(ds, batch_size=8), step, 2, None)\n"
            "print(len(rows) > 0)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"
    assert done.stderr == ""  # was: USDT profiler_start/stop, ERROR ... gpuGetDeviceCount failed


class SlowBackward(torch.autograd.Function):
    """An op whose backward takes a known 80 ms (a custom kernel gone slow) and whose
    forward takes nothing."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(0.08)
        return grad


class SlowBackwardNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden, self.out = torch.nn.Linear(784, 32), torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.out(SlowBackward.apply(self.hidden(x.flatten(1))))


def test_a_train_steps_compute_is_split_into_forward_and_backward(small_data):
    """A slow backward (80 ms in a custom op) is compute, but which part: the record's
    forward_s and backward_s say backward, where compute_s alone read "compute-bound" with
    nothing to point at; a traverse step has no split."""
    from benchlib.core import throughput

    loader = _loader(small_data)
    step = loops.Stepper("train", torch.device("cpu"), SlowBackwardNet(), lr=0.01)
    times = loops.run_epoch(loader, step, warmup_steps=1, max_steps=5)
    assert len(times.forward_s) == len(times.backward_s) == 5
    forward, backward = statistics.median(times.forward_s), statistics.median(times.backward_s)
    assert all(b >= 0.08 for b in times.backward_s) and backward - forward > 0.05
    assert all(f + b <= c + 1e-6 for f, b, c in zip(times.forward_s, times.backward_s,
                                                    times.compute_s))
    mine = throughput.rank_share(times.samples, times.data_s, times.compute_s, times.epoch_s,
                                 1.0, 1, forward_s=times.forward_s, backward_s=times.backward_s)
    assert mine["backward_s"] >= 0.08 > mine["forward_s"]
    epoch = throughput.across_ranks([mine])
    assert epoch["backward_s"] == mine["backward_s"]
    traverse = loops.run_epoch(loader, loops.Stepper("traverse", torch.device("cpu")), 1,
                               max_steps=3)
    assert traverse.forward_s == [] and traverse.backward_s == []


class _FailsAt:
    """Items 0..n-1; item `bad` raises in whichever DataLoader worker reads it; every worker
    writes its pid to `pids` first."""

    def __init__(self, n: int, bad: int, pids):
        self.n, self.bad, self.pids = n, bad, pids

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        (self.pids / str(os.getpid())).touch()
        if i == self.bad:
            raise ValueError(f"item {i} is unreadable")
        return torch.zeros(2), 0


def test_a_failed_epochs_dataloader_workers_have_ended_when_its_error_reaches_the_caller(tmp_path):
    """A worker's error reached the caller while its DataLoader's workers lived on (the
    traceback holds their iterator): a shard row's clean-up then raced them, and they wrote
    Mosaic's lock files and cache folders again after it."""
    loader = DataLoader(_FailsAt(64, 20, tmp_path), batch_size=4, num_workers=2)
    with pytest.raises(ValueError, match="item 20 is unreadable") as failed:
        loops.run_epoch(loader, loops.Stepper("traverse", torch.device("cpu")), warmup_steps=0)
    workers = [int(p.name) for p in tmp_path.iterdir() if int(p.name) != os.getpid()]
    assert len(workers) == 2 and failed.value.__traceback__ is not None
    for pid in workers:  # reaped by the DataLoader's shutdown: gone, not zombies
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
