"""benchlib.core.memory: peak memory of a window, and the breakdown of a model's bytes."""

import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from benchlib.core import memory

MiB = 2**20


def test_linear_param_bytes_are_its_weights_and_bias_in_fp32():
    model = nn.Linear(1000, 100)  # 100 000 weights + 100 biases
    parts = memory.breakdown(model, None, None)
    assert parts == {"param_bytes": 100_100 * 4, "grad_bytes": 0, "grad_bytes_at_peak": None,
                     "optimizer_state_bytes": 0, "other_bytes": None,
                     "breakdown_kind": memory.WITH_GRADS}


def test_sgd_momentum_state_and_gradients_equal_the_parameters_after_one_step():
    model = nn.Linear(256, 64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(8, 256)).sum().backward()
    optimizer.step()
    param_bytes = (256 * 64 + 64) * 4
    parts = memory.breakdown(model, optimizer, peak_bytes=10 * param_bytes)
    assert parts == {"param_bytes": param_bytes, "grad_bytes": param_bytes,
                     "grad_bytes_at_peak": None, "optimizer_state_bytes": param_bytes,
                     "other_bytes": 8 * param_bytes, "breakdown_kind": memory.WITH_GRADS}
    # a profiled step's peak (parts_at_peak): only the gradients present then are subtracted
    profiled = {name: 0 for name in memory.CATEGORIES.values()}
    profiled.update(param_bytes=param_bytes, optimizer_state_bytes=param_bytes,
                    grad_bytes_at_peak=param_bytes // 2, activation_bytes=6 * param_bytes,
                    profiled_peak_bytes=8 * param_bytes + param_bytes // 2)
    at_peak = memory.breakdown(model, optimizer, 10 * param_bytes, profiled)
    assert at_peak["other_bytes"] == at_peak["activation_bytes"] == 6 * param_bytes
    assert at_peak["grad_bytes"] == param_bytes and at_peak["grad_bytes_at_peak"] == param_bytes // 2
    assert at_peak["breakdown_kind"] == memory.AT_PEAK


def test_adam_state_is_two_moments_per_parameter():
    model = nn.Linear(128, 32, bias=False)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 128)).sum().backward()
    optimizer.step()
    # exp_avg and exp_avg_sq, each as big as the weight; the step count is a 1-element tensor
    state = memory.breakdown(model, optimizer, None)["optimizer_state_bytes"]
    assert state == 2 * 128 * 32 * 4 + 4


WINDOW = """
import json, torch
from benchlib.core import memory
size = 64 * 2**20
with memory.PeakMemory("cpu") as peak:
    start = memory.rss_bytes()
    t = torch.ones(size // 4)  # written, so its pages are resident
    del t
print(json.dumps({**peak.figures, "start": start, "size": size}))
"""


def test_peak_rss_of_a_window_grows_by_a_tensor_allocated_inside_it():
    """In a fresh process: one that has freed memory before (this suite's) may keep those
    pages resident and fill them again, and its RSS would not grow."""
    done = subprocess.run([sys.executable, "-c", WINDOW], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    f = json.loads(done.stdout.strip().splitlines()[-1])
    size, start = f["size"], f["start"]
    assert f["peak_kind"] == memory.RSS_WINDOW  # clear_refs is writable here
    assert f["peak_bytes"] == f["peak_rss_bytes"]
    assert 0.97 * size <= f["peak_bytes"] - start <= size + 16 * MiB
    assert (f["peak_alloc_bytes"], f["peak_reserved_bytes"], f["alloc_retries"], f["ooms"]) \
        == (None, None, None, None)  # CUDA's figures: none on the CPU, never invented


def test_a_new_window_forgets_the_peak_of_the_one_before():
    with memory.PeakMemory("cpu"):
        t = torch.ones(96 * MiB // 4)
        del t
    with memory.PeakMemory("cpu") as second:
        start = memory.rss_bytes()
    assert second.figures["peak_bytes"] - start < 16 * MiB


def test_without_clear_refs_the_peak_is_the_process_lifetime_one_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    with memory.PeakMemory("cpu") as peak:
        pass
    assert peak.figures["peak_kind"] == memory.RSS_LIFETIME
    assert peak.figures["peak_bytes"] >= memory.rss_bytes() - 16 * MiB


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_peaks_see_a_tensor_allocated_in_the_window():
    with memory.PeakMemory("cuda") as peak:
        t = torch.ones(64 * MiB // 4, device="cuda")
        del t
    f = peak.figures
    assert f["peak_alloc_bytes"] >= 64 * MiB and f["peak_reserved_bytes"] >= f["peak_alloc_bytes"]
    assert f["peak_bytes"] == f["peak_reserved_bytes"] and f["ooms"] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_retries_and_ooms_count_from_the_windows_start():
    """An OutOfMemoryError before the window (a warm-up's) is not the window's."""
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(2**50, dtype=torch.uint8, device="cuda")
    assert torch.cuda.memory_stats()["num_ooms"] >= 1
    with memory.PeakMemory("cuda") as peak:
        pass
    assert peak.figures["ooms"] == 0 and peak.figures["alloc_retries"] == 0


OWN_BYTES = """
import json, torch
from benchlib.core import memory
memory.warm_kernels()  # what loads on first use is the libraries', not the model's
def trained(build, x, y):
    baseline = memory.baseline_bytes("cpu")  # before the model is built
    peak = memory.PeakMemory("cpu", baseline)
    peak.reset()
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    step()
    window = peak.read()
    at_peak = memory.parts_at_peak(step, "cpu")  # one more step, profiled
    return {**window, **memory.breakdown(model, opt, window["model_peak_bytes"], at_peak)}
wide = lambda: torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.Linear(4096, 10))
deep = lambda: torch.nn.Sequential(*[m for _ in range(8) for m in (torch.nn.Linear(256, 256),
                                                                   torch.nn.ReLU())],
                                   torch.nn.Linear(256, 10))
print(json.dumps({"wide": trained(wide, torch.rand(2, 2048), torch.randint(0, 10, (2,))),
                  "deep": trained(deep, torch.rand(16384, 256), torch.randint(0, 10, (16384,)))}))
"""


def test_the_models_own_bytes_leave_out_the_interpreter_and_the_parts_are_those_at_the_peak():
    """In a fresh process. Wide: 32 MiB of weights and tiny activations: its own bytes are
    parameters, gradients and momentum (some 96 MiB) while the process's RSS holds the
    interpreter and torch as well (hundreds of MiB: what notebook 50's CPU ratios divided);
    its peak comes with every gradient made. Deep: 2 MiB of weights and 128 MiB of
    activations at batch 16,384: its peak comes before backward has made gradients, so
    subtracting every gradient (as the window's end holds them) would be wrong."""
    done = subprocess.run([sys.executable, "-c", OWN_BYTES], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    got = json.loads(done.stdout.strip().splitlines()[-1])
    wide, deep = got["wide"], got["deep"]
    assert wide["model_peak_kind"] == memory.MODEL_RSS
    three = wide["param_bytes"] + wide["grad_bytes"] + wide["optimizer_state_bytes"]
    assert three == 3 * wide["param_bytes"] > 96 * MiB
    assert three - 4 * MiB <= wide["model_peak_bytes"] <= three + 48 * MiB  # pages reused
    assert wide["peak_bytes"] > wide["model_peak_bytes"] + 150 * MiB  # the interpreter's
    assert wide["grad_bytes_at_peak"] == wide["grad_bytes"]
    assert wide["breakdown_kind"] == deep["breakdown_kind"] == memory.AT_PEAK
    assert deep["grad_bytes_at_peak"] < 0.05 * deep["grad_bytes"]
    assert abs(deep["activation_bytes"] - 128 * MiB) < 1024  # 16 of 16384 x 256 floats, kept
    assert deep["input_bytes"] == 16 * MiB + 16384 * 8  # the batch and its int64 labels
    assert deep["other_bytes"] >= 144 * MiB
