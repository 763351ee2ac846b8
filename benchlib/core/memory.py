"""Peak memory around a timed window, and where the bytes went.

On CUDA the allocator's own counters: `reset_peak_memory_stats` at the window's start,
then the peak allocated and reserved bytes and, from `memory_stats`, the allocation
retries (the allocator freed its cache to find room: a warning that the batch is near
the edge) and the out-of-memory errors it raised. On the CPU the process's peak resident
set (RSS): Linux keeps a high-water mark (VmHWM in /proc/self/status) that writing "5"
to /proc/self/clear_refs resets, so the peak is the window's own; where that file cannot
be written, the peak is the process's lifetime peak (`getrusage`), and `peak_kind` says
so. A figure that does not apply is None, never a guess (no allocation retries on CPU).

`breakdown(model, optimizer, peak_bytes)`: parameters, gradients and optimizer state are
counted from the tensors themselves; the rest of the peak (activations, workspace, and on
the CPU the interpreter and libraries as well) is `other_bytes`. `record_figures` puts
the two together as every trainer's record publishes them.
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


class PeakMemory:
    """The peaks of one window: `reset()` (or `with PeakMemory(device) as peak:`) at its
    start, `read()` at its end (the `with` block leaves the figures in `peak.figures`)."""

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.windowed_rss = False
        self.figures: dict[str, Any] = {}

    def reset(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.windowed_rss = _reset_rss_peak()

    def read(self) -> dict[str, Any]:
        """peak_alloc_bytes, peak_reserved_bytes, alloc_retries, ooms (CUDA; None on CPU),
        peak_rss_bytes (the host process), and peak_bytes: the one that counts against a
        limit (reserved on CUDA, RSS on CPU), what it is in peak_kind."""
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
        self.figures = figures
        return figures

    def __enter__(self) -> PeakMemory:
        self.reset()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.read()


def tensor_bytes(t: torch.Tensor) -> int:
    """The bytes this rank holds: a sharded tensor's (FSDP2's DTensor) local shard only."""
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.numel() * t.element_size()


def breakdown(model: nn.Module, optimizer: torch.optim.Optimizer | None,
              peak_bytes: int | None) -> dict[str, int | None]:
    """Bytes of the parameters, of the gradients there are, of the optimizer's state
    tensors (momentum, Adam's moments), and the rest of `peak_bytes`: activations and
    workspace (None without a peak; on CPU it also holds the interpreter and libraries)."""
    params = list(model.parameters())
    param_bytes = sum(tensor_bytes(p) for p in params)
    grad_bytes = sum(tensor_bytes(p.grad) for p in params if p.grad is not None)
    state_bytes = 0
    if optimizer is not None:
        for state in optimizer.state.values():
            state_bytes += sum(tensor_bytes(v) for v in state.values()
                               if isinstance(v, torch.Tensor))
    other = None if peak_bytes is None else peak_bytes - param_bytes - grad_bytes - state_bytes
    return {"param_bytes": param_bytes, "grad_bytes": grad_bytes,
            "optimizer_state_bytes": state_bytes, "other_bytes": other}


def record_figures(peaks: dict[str, Any], model: nn.Module,
                   optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """A training record's memory metrics from a window's `PeakMemory.read()`: the peaks,
    `peak_mem_bytes` (the name earlier records use for the peak allocated), and the
    breakdown of the peak allocated (CUDA: not the allocator's cache) or of RSS (CPU)."""
    return {"peak_mem_bytes": peaks["peak_alloc_bytes"], **peaks,
            **breakdown(model, optimizer, peaks["peak_alloc_bytes"] or peaks["peak_bytes"])}
