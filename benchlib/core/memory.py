"""Peak memory around a timed window, and where the bytes went.

On CUDA the allocator's own counters: `reset_peak_memory_stats` and
`reset_accumulated_memory_stats` at the window's start, so that the peak allocated and
reserved bytes, the allocation retries (the allocator freed its cache to find room: a
warning that the batch is near the edge) and the out-of-memory errors it raised are the
window's, not the warm-up's before it. On the CPU the process's peak resident set (RSS):
Linux keeps a high-water mark (VmHWM in /proc/self/status) that writing "5" to
/proc/self/clear_refs resets, so the peak is the window's own; where that file cannot be
written, the peak is the process's lifetime peak (`getrusage`), and `peak_kind` says so.
A figure that does not apply is None, never a guess (no allocation retries on CPU).

The model's own bytes (`model_peak_bytes`): the peak above a baseline read before the
model was built (`baseline_bytes`), so that on the CPU the interpreter and libraries
(some 0.7 GiB of RSS with torch imported) are not in it; `model_peak_kind` says which
it is. CPU comparisons (notebook 50's FSDP2 against DDP, checkpointing against none) are
made on it.

`breakdown(model, optimizer, peak_bytes, at_peak)`: parameters, gradients and optimizer
state counted from the tensors themselves; the rest of the peak is `other_bytes`:
activations, the batch and workspace. Gradients do not all exist at the peak (backward
makes them while it frees activations): where one step was profiled (`parts_at_peak`:
torch.profiler's memory timeline, its categories at the step's peak) the gradients
present then are subtracted and activations, inputs and temporaries stand apart; where
not, no gradient is subtracted, and `breakdown_kind` says that `other_bytes` holds them.
`record_figures` puts the peaks and the breakdown together as every trainer's record
publishes them.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")

# what `peak_bytes` is: the figure compared with a memory limit
CUDA_RESERVED = "cuda reserved, this window"
RSS_WINDOW = "rss, this window"
RSS_LIFETIME = "rss, process lifetime (clear_refs not writable)"
# what `model_peak_bytes` is
MODEL_CUDA = "cuda allocated above the baseline before the model was built"
MODEL_RSS = "rss above the baseline before the model was built"
# what `other_bytes` holds
AT_PEAK = "at the peak of one profiled step (torch.profiler's memory timeline)"
WITH_GRADS = "other holds activations and the gradients present at the peak (not measured apart)"


def _status_bytes(key: str) -> int | None:
    """A `kB` line of /proc/self/status (VmHWM, VmRSS) in bytes; None where there is none."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def rss_bytes() -> int | None:
    """This process's resident set now."""
    return _status_bytes("VmRSS")


def _reset_rss_peak() -> bool:
    """Reset the kernel's RSS high-water mark to the RSS now; False where it cannot be."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _status_bytes("VmHWM") is not None


def _lifetime_rss_peak() -> int:
    """getrusage's peak RSS of this process: kB on Linux, bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def warm_kernels() -> None:
    """One training step of a tiny net with the common layers (convolution, batch and
    layer norm, pooling, embedding, attention, linear, SGD with momentum) on the CPU, so
    that the code libraries load on first use (some 160 MiB of RSS here, measured: a
    first step of a 2-layer MLP took 256 MiB above the baseline for 97 MiB of parameters,
    gradients and momentum; 97 after this) is in the baseline, not in the model's bytes."""
    ids = torch.tensor([[0, 1, 2, 3]])
    conv = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.LayerNorm(16), nn.Linear(16, 8))
    embed = nn.Embedding(8, 8)
    params = [*conv.parameters(), *embed.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    q = embed(ids).unsqueeze(1)
    attended = nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    loss = nn.functional.cross_entropy(conv(torch.rand(2, 3, 4, 4)), torch.tensor([0, 1]))
    (loss + attended.sum()).backward()
    optimizer.step()


def baseline_bytes(device: torch.device | str) -> int | None:
    """What the process holds before the model is built: CUDA's allocated bytes, or the
    RSS on the CPU; the model's own bytes are the peak above it."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    return rss_bytes()


class PeakMemory:
    """The peaks of one window: `reset()` (or `with PeakMemory(device) as peak:`) at its
    start, `read()` at its end (the `with` block leaves the figures in `peak.figures`).
    `baseline`: `baseline_bytes()` read before the model was built (None: not known)."""

    def __init__(self, device: torch.device | str, baseline: int | None = None):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.baseline = baseline
        self.windowed_rss = False
        self.figures: dict[str, Any] = {}

    def reset(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            torch.cuda.reset_accumulated_memory_stats(self.device)  # retries, OOMs: this window's
        self.windowed_rss = _reset_rss_peak()

    def read(self) -> dict[str, Any]:
        """peak_alloc_bytes, peak_reserved_bytes, alloc_retries, ooms (CUDA; None on CPU),
        peak_rss_bytes (the host process), and peak_bytes: the one that counts against a
        limit (reserved on CUDA, RSS on CPU), what it is in peak_kind; with a baseline,
        model_peak_bytes (the peak above it) and model_peak_kind."""
        rss = _status_bytes("VmHWM") if self.windowed_rss else _lifetime_rss_peak()
        figures: dict[str, Any] = {"peak_alloc_bytes": None, "peak_reserved_bytes": None,
                                   "alloc_retries": None, "ooms": None, "peak_rss_bytes": rss}
        if self.cuda:
            torch.cuda.synchronize(self.device)
            stats = torch.cuda.memory_stats(self.device)
            figures.update(peak_alloc_bytes=torch.cuda.max_memory_allocated(self.device),
                           peak_reserved_bytes=torch.cuda.max_memory_reserved(self.device),
                           alloc_retries=stats.get("num_alloc_retries", 0),
                           ooms=stats.get("num_ooms", 0))
            figures.update(peak_bytes=figures["peak_reserved_bytes"], peak_kind=CUDA_RESERVED)
        else:
            figures.update(peak_bytes=rss,
                           peak_kind=RSS_WINDOW if self.windowed_rss else RSS_LIFETIME)
        own = figures["peak_alloc_bytes"] if self.cuda else figures["peak_rss_bytes"]
        known = self.baseline is not None and own is not None
        figures.update(baseline_bytes=self.baseline,
                       model_peak_bytes=own - self.baseline if known else None,
                       model_peak_kind=(MODEL_CUDA if self.cuda else MODEL_RSS) if known else None)
        self.figures = figures
        return figures

    def __enter__(self) -> PeakMemory:
        self.reset()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.read()


# torch.profiler's memory categories, as the record names them
CATEGORIES = {"PARAMETER": "param_bytes", "OPTIMIZER_STATE": "optimizer_state_bytes",
              "GRADIENT": "grad_bytes_at_peak", "ACTIVATION": "activation_bytes",
              "INPUT": "input_bytes", "TEMPORARY": "temporary_bytes",
              "AUTOGRAD_DETAIL": "autograd_bytes", None: "unknown_bytes"}


def parts_at_peak(step: Any, device: torch.device | str) -> dict[str, int] | None:
    """What the memory held at the peak of one call of `step` (a training step), by
    torch.profiler's memory timeline (`profile_memory`, the categories of
    `torch.profiler._memory_profiler`: parameters, optimizer state, gradients,
    activations, inputs, temporaries, autograd's own), on CUDA and on the CPU alike: the
    bytes PyTorch allocated, not the pages a process keeps. One step, never a timed one
    (the profiler costs time); None where the profiler cannot say (its API is private)."""
    from torch.profiler import profile

    from benchlib.core.loops import _activities

    device = torch.device(device)
    try:
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

        with profile(activities=_activities(device), profile_memory=True, record_shapes=True,
                     with_stack=True) as prof:
            step()
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(device)
    except Exception:  # noqa: BLE001 - a torch whose private memory profiler differs
        return None
    if not sizes:
        return None
    at_peak = max(sizes, key=sum)
    out = {name: 0 for name in CATEGORIES.values()}
    for category, index in _CATEGORY_TO_INDEX.items():
        out[CATEGORIES[getattr(category, "name", None)]] += int(at_peak[index + 1])
    out["profiled_peak_bytes"] = int(sum(at_peak))
    return out


def tensor_bytes(t: torch.Tensor) -> int:
    """The bytes this rank holds: a sharded tensor's (FSDP2's DTensor) local shard only."""
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.numel() * t.element_size()


def breakdown(model: nn.Module, optimizer: torch.optim.Optimizer | None,
              peak_bytes: int | None, at_peak: dict[str, int] | None = None) -> dict[str, Any]:
    """Bytes of the parameters, of the gradients there are (at the window's end: all of
    them), of the optimizer's state tensors (momentum, Adam's moments), and the rest of
    `peak_bytes` (`other_bytes`). With `at_peak` (parts_at_peak: the categories at a
    profiled step's peak), the rest is that peak less its parameters, optimizer state and
    the gradients present then, and activations, inputs and temporaries are apart; without,
    no gradient is subtracted (they do not all exist at the peak) and `breakdown_kind`
    says that `other_bytes` holds them. None without a peak."""
    params = list(model.parameters())
    param_bytes = sum(tensor_bytes(p) for p in params)
    grad_bytes = sum(tensor_bytes(p.grad) for p in params if p.grad is not None)
    state_bytes = 0
    if optimizer is not None:
        for state in optimizer.state.values():
            state_bytes += sum(tensor_bytes(v) for v in state.values()
                               if isinstance(v, torch.Tensor))
    parts = {"param_bytes": param_bytes, "grad_bytes": grad_bytes, "grad_bytes_at_peak": None,
             "optimizer_state_bytes": state_bytes,
             "other_bytes": None if peak_bytes is None else peak_bytes - param_bytes - state_bytes,
             "breakdown_kind": WITH_GRADS}
    if at_peak is not None:
        parts.update({k: v for k, v in at_peak.items() if k not in ("param_bytes",
                                                                      "optimizer_state_bytes")},
                     other_bytes=at_peak["profiled_peak_bytes"] - at_peak["param_bytes"]
                     - at_peak["optimizer_state_bytes"] - at_peak["grad_bytes_at_peak"],
                     breakdown_kind=AT_PEAK)
    return parts


def record_figures(peaks: dict[str, Any], model: nn.Module,
                   optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """A training record's memory metrics from a window's `PeakMemory.read()`: the peaks,
    `peak_mem_bytes` (the name earlier records use for the peak allocated), and the
    breakdown of the model's own bytes (the peak above the baseline before the model was
    built) where known, else of the peak allocated (CUDA) or of RSS (CPU)."""
    counted = next((peaks[k] for k in ("model_peak_bytes", "peak_alloc_bytes", "peak_bytes")
                    if peaks.get(k) is not None), None)
    return {"peak_mem_bytes": peaks["peak_alloc_bytes"], **peaks,
            **breakdown(model, optimizer, counted)}
