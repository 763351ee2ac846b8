"""Energy and cost of a run (benchlib.core.energy): NVML's counters where a GPU has them,
"unknown" (None) where not, and cost per million samples only with a price set."""

import pytest

from benchlib.core import energy
from benchlib.errors import ConfigError


def test_two_ranks_energy_gpu_hours_and_cost_add_up(monkeypatch):
    monkeypatch.setenv(energy.PRICE_VARIABLE, "2.5")
    ranks = [{"energy_j": 3600.0, "gpus": 1, "window_s": 36.0},
             {"energy_j": 5400.0, "gpus": 1, "window_s": 36.0}]
    got = energy.run_figures(ranks, samples=9000)
    assert got["energy_j"] == 9000.0 and got["energy_j_per_sample"] == 1.0
    assert got["gpu_hours"] == pytest.approx(0.02)  # 2 GPUs x 36 s
    assert got["cost_per_million_samples"] == pytest.approx(2.5 * 0.02 / 9000 * 1e6)


def test_one_unreadable_counter_makes_the_energy_unknown_not_half(monkeypatch):
    monkeypatch.delenv(energy.PRICE_VARIABLE, raising=False)
    got = energy.run_figures([{"energy_j": 10.0, "gpus": 1, "window_s": 1.0},
                              {"energy_j": None, "gpus": 1, "window_s": 1.0}], samples=10)
    assert got["energy_j"] is None and got["energy_j_per_sample"] is None
    assert got["gpu_hours"] == pytest.approx(2 / 3600) and got["cost_per_million_samples"] is None


def test_on_a_cpu_every_figure_is_unknown(monkeypatch):
    monkeypatch.setenv(energy.PRICE_VARIABLE, "1")
    meter = energy.EnergyMeter([])  # a CPU rank watches no GPU
    meter.start()
    got = energy.run_figures([meter.stop()], samples=100)
    assert got == {"energy_j": None, "energy_j_per_sample": None, "energy_untimed_j": None,
                   "gpu_hours": None, "gpu_hours_untimed": None, "gpu_hour_price": 1.0,
                   "cost_per_million_samples": None}


@pytest.mark.parametrize("price", ["cheap", "-1", "nan"])
def test_a_price_that_is_not_one_is_refused_naming_the_variable(monkeypatch, price):
    monkeypatch.setenv(energy.PRICE_VARIABLE, price)
    with pytest.raises(ConfigError, match=f"BENCHLIB_GPU_HOUR_PRICE: '{price}' is not a price"):
        energy.gpu_hour_price()


# --------------------------------------------- the timed window, with a stand-in for NVML

class FakeNvml:
    """pynvml's calls the meter and the sampler make, over GPUs known by UUID only (an
    index lookup raises: a meter that used one would read the wrong GPU). `joules[uuid]`
    is the counter the test moves; `calls` their order, with the syncs."""

    def __init__(self, uuids):
        self.joules = {u: 0.0 for u in uuids}
        self.util = {u: 0 for u in uuids}
        self.calls = []

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.joules:
            raise RuntimeError(f"NVML: no GPU {uuid}")
        return uuid

    def nvmlDeviceGetHandleByIndex(self, index):
        raise AssertionError("looked up by CUDA index: under CUDA_VISIBLE_DEVICES that is "
                             "another GPU")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.calls.append(("read", handle))
        return round(self.joules[handle] * 1e3)  # millijoules

    def nvmlDeviceGetUtilizationRates(self, handle):
        class Rates:
            gpu = self.util[handle]
        return Rates()


VISIBLE = ["GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"]  # NVML's GPUs 0-3


def test_energy_is_read_over_the_timed_steps_only_synchronized_compile_apart():
    """A compiled run's first step draws 5,000 J (the compile), each warm-up step after it
    20 J, each timed step 1.5 J a sample: the counter read over the whole loop would give
    several times the timed steps' joules per sample (GPU check run 5: 6.72 J per sequence
    where the timed steps drew at most about 1.8). Two epochs, each with its warm-up; the
    meter's edges are the first timed step and each epoch's end, each after a sync."""
    import torch

    from benchlib.core import loops

    nvml = FakeNvml(VISIBLE)
    gpu = "GPU-cccc"  # CUDA_VISIBLE_DEVICES=2,3: CUDA's device 0 is NVML's GPU 2
    meter = energy.EnergyMeter([gpu], sync=lambda: nvml.calls.append(("sync", None)), nvml=nvml)
    step = loops.Stepper("train", torch.device("cpu"), torch.nn.Linear(4, 3), lr=0.1)
    batch = 8
    loader = [(torch.rand(batch, 4), torch.randint(0, 3, (batch,)))] * 6
    drawn = iter([5000.0, 20.0] + [1.5 * batch] * 4 + [20.0, 20.0] + [1.5 * batch] * 4)

    def on_step(loss):
        nvml.joules[gpu] += next(drawn)
    meter.start()
    timed_samples = 0
    for _ in range(2):
        times = loops.run_epoch(loader, step, warmup_steps=2, on_step=on_step,
                                on_timed=meter.timed)
        meter.untimed()
        timed_samples += sum(times.timed()[2])
    got = meter.stop()
    assert got["gpus"] == 1 and timed_samples == 64
    assert got["energy_j"] == pytest.approx(64 * 1.5)
    assert got["energy_untimed_j"] == pytest.approx(5000 + 3 * 20)
    figures = energy.run_figures([{**got}], samples=timed_samples)
    assert figures["energy_j_per_sample"] == pytest.approx(1.5)
    assert figures["energy_untimed_j"] == pytest.approx(5060)
    reads = [c for c in nvml.calls if c[0] == "read"]
    assert {h for _, h in reads} == {gpu} and len(reads) == 6  # start, 2 x (timed, untimed), stop
    assert all(nvml.calls[i - 1][0] == "sync" for i, c in enumerate(nvml.calls) if c[0] == "read")


def test_nvml_is_asked_for_the_gpus_by_uuid_and_an_unknown_one_is_unknown_energy(monkeypatch):
    import torch

    class Props:
        uuid = "cccc"  # torch's form: no GPU- prefix

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    assert energy.device_uuids([0]) == ["GPU-cccc"]
    nvml = FakeNvml(VISIBLE)
    assert energy.nvml_handles(["GPU-cccc", "GPU-dddd"], nvml)[1] == ["GPU-cccc", "GPU-dddd"]
    meter = energy.EnergyMeter(["GPU-eeee"], nvml=nvml)  # not in NVML: no handle
    meter.start()
    assert meter.stop()["energy_j"] is None and meter.handles == []


def test_utilisation_is_averaged_over_the_timed_window():
    """A compiled run's loop is mostly compile at 10% busy; the timed steps are 90%."""
    import time

    nvml = FakeNvml(VISIBLE)
    meter = energy.EnergyMeter(["GPU-cccc"], nvml=nvml)
    sampler = energy.UtilisationSampler(["GPU-cccc"], meter, interval_s=0.01, nvml=nvml)
    nvml.util["GPU-cccc"] = 10
    sampler.start()
    meter.start()
    time.sleep(0.3)
    nvml.util["GPU-cccc"] = 90
    meter.timed()
    time.sleep(0.3)
    meter.untimed()
    nvml.util["GPU-cccc"] = 10
    time.sleep(0.1)
    got = sampler.stop()
    assert got["util_window"] == "timed steps" and got["gpu_util_pct"] > 80
    assert got["cpu_util_pct"] is not None


def test_the_energy_window_is_the_samples_per_s_window_past_the_prefetched_batches():
    """4 workers prefetch 8 batches at start-up, more than the 2 warm-up steps: samples/s
    leaves them out (they came for free), and so must the energy meter, or 6 data-free
    steps' joules land in J/sample (issue 51: the energy window opened after warmup_steps,
    samples/s's after the prefetched batches). The trainer opens both at
    throughput.window_start."""
    import torch

    from benchlib.core import loops, throughput

    nvml = FakeNvml(VISIBLE)
    gpu = "GPU-cccc"
    meter = energy.EnergyMeter([gpu], nvml=nvml)
    step = loops.Stepper("train", torch.device("cpu"), torch.nn.Linear(4, 3), lr=0.1)
    batch, steps, warmup, prefetched = 8, 12, 2, 8
    loader = [(torch.rand(batch, 4), torch.randint(0, 3, (batch,)))] * steps
    drawn = iter([30.0] * prefetched + [1.5 * batch] * (steps - prefetched))

    def on_step(loss):
        nvml.joules[gpu] += next(drawn)
    start = throughput.window_start(warmup, prefetched, steps)
    meter.start()
    times = loops.run_epoch(loader, step, start, on_step=on_step, on_timed=meter.timed)
    meter.untimed()
    got = meter.stop()
    mine = throughput.rank_share(times.samples, times.data_s, times.compute_s, times.epoch_s,
                                 1.0, warmup, prefetched=prefetched)
    assert start == mine["warmup_excluded"] == 8
    assert sum(times.timed()[2]) == mine["samples"] == 4 * batch
    assert energy.run_figures([got], mine["samples"])["energy_j_per_sample"] == pytest.approx(1.5)


def test_the_trainer_opens_its_energy_window_where_its_samples_per_s_window_opens(small_data):
    """The single-process trainer itself, in this process, with 2 workers prefetching 4
    batches past its 1 warm-up step: the samples its energy and utilisation window saw are
    those its samples/s was taken over (before, the energy window held 3 steps more)."""
    import torch

    from benchlib.distributed.env import DistEnv
    from benchlib.trainers import ddp, ddp_flags

    args = ddp_flags.parser("single").parse_args([
        "--dataset", "fashion-mnist", "--path", str(small_data), "--model", "toynet",
        "--batch-size", "50", "--num-workers", "2", "--warmup-steps", "1", "--epochs", "1",
        "--log-interval", "0"])
    env = DistEnv(0, 0, 1, 1, 0, "127.0.0.1", 0, "single")
    out = ddp.train(args, env, torch.device("cpu"), "gloo")
    [epoch] = out["details"]["epochs"]
    assert (epoch["steps"], epoch["warmup_excluded"]) == (12, 4)  # 600 samples, 4 prefetched
    assert out["metrics"]["energy_window_samples"] == (12 - 4) * 50
