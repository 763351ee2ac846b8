"""Clocks that can be trusted (the statistics over what they time: benchlib.core.stats).

On CUDA the device runs behind the host: a host clock read without a synchronize
measures how fast kernels were queued, not run. Two tools, for two jobs:

- `StepMarks` times every step of a loop on the device's own timeline (CUDA events,
  read after one synchronize at the end), so measuring does not stall the pipeline
  between host and device. On CPU it is the host clock.
- `StepClock` reads the host clock after a synchronize: for whole blocks of work.

Warm-up steps are excluded by the caller (their count is a recorded parameter).
"""

from __future__ import annotations

import time
from typing import Any


class StepClock:
    """perf_counter, synchronized with the device first when it is a CUDA device."""

    def __init__(self, device: Any = None):
        self.now = time.perf_counter  # no device to wait for: the bare clock, no extra call
        if device is not None and getattr(device, "type", str(device)).startswith("cuda"):
            import torch

            def synced() -> float:
                torch.cuda.synchronize(device)
                return time.perf_counter()

            self.now = synced


class StepMarks:
    """Points in a sequence of steps: `mark()` now, `seconds(a, b)` between two marks
    once `wait()` has returned. CUDA marks are events recorded on the current stream:
    the device stamps them when it gets there, and nothing waits until `wait()`."""

    def __init__(self, device: Any = None):
        self.device = device
        self.cuda = device is not None and getattr(device, "type", str(device)).startswith("cuda")
        if self.cuda:
            import torch

            self._event = lambda: torch.cuda.Event(enable_timing=True)
            self._sync = lambda: torch.cuda.synchronize(device)

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = self._event()
        event.record()
        return event

    def wait(self) -> None:
        """Let the device finish what was queued, so that every mark can be read."""
        if self.cuda:
            self._sync()

    def seconds(self, a: Any, b: Any) -> float:
        return a.elapsed_time(b) / 1e3 if self.cuda else b - a


# How a record's samples/s was timed (its `timing` metric), so that figures taken two
# ways are not compared unawares:
# - WINDOW: the timed steps' samples over their time, nothing synchronized inside the
#   window and one synchronize at its end (PyTorch: StepMarks, CUDA events on a GPU and
#   the host clock on CPU; JAX: the host clock and one block_until_ready). Every PyTorch
#   trainer but the elastic one, and JAX beside them (notebook 40).
# - PER_STEP: the median over steps of each step's samples over its host-clock time, every
#   step ended by a synchronize (the elastic trainer: its loss all-reduce, which it needs
#   each step to agree on stopping); the per-step sync is in every step's time.
WINDOW = "window"
PER_STEP = "per_step"
