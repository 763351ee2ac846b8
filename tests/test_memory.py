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
    assert parts == {"param_bytes": 100_100 * 4, "grad_bytes": 0, "optimizer_state_bytes": 0,
                     "other_bytes": None}


def test_sgd_momentum_state_and_gradients_equal_the_parameters_after_one_step():
    model = nn.Linear(256, 64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(8, 256)).sum().backward()
    optimizer.step()
    param_bytes = (256 * 64 + 64) * 4
    parts = memory.breakdown(model, optimizer, peak_bytes=10 * param_bytes)
    assert parts == {"param_bytes": param_bytes, "grad_bytes": param_bytes,
                     "optimizer_state_bytes": param_bytes, "other_bytes": 7 * param_bytes}


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
