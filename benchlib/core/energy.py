"""Energy and cost of a training window: NVML's total-energy counter (millijoules since
the driver loaded, Volta and newer) read at the window's start and end on each GPU a rank
uses, the GPU-hours of the window, and, with a price per GPU-hour set for the testbed
(BENCHLIB_GPU_HOUR_PRICE, in any currency), its cost per million samples.

Where no counter is readable (a CPU, a GPU or driver without it) every figure is None:
"unknown", never an invented one."""

from __future__ import annotations

import os
import time
from typing import Any

from benchlib.errors import ConfigError

PRICE_VARIABLE = "BENCHLIB_GPU_HOUR_PRICE"


def gpu_hour_price() -> float | None:
    """The testbed's price of one GPU-hour, or None when not set."""
    text = os.environ.get(PRICE_VARIABLE, "").strip()
    if not text:
        return None
    try:
        price = float(text)
    except ValueError:
        price = -1.0
    if not price >= 0:
        raise ConfigError(PRICE_VARIABLE, f"{text!r} is not a price: give a number >= 0 "
                          "(the cost of one GPU-hour on this testbed, in any currency)")
    return price


class EnergyMeter:
    """NVML's energy counters of `gpu_indices` around a window (`start`, then `stop`)."""

    def __init__(self, gpu_indices: list[int]):
        self.handles: list[Any] = []
        self.first: list[int] = []
        self.started = self.seconds = 0.0
        if gpu_indices:
            try:
                import pynvml

                pynvml.nvmlInit()
                self.nvml = pynvml
                self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in gpu_indices]
            except Exception:  # no NVML library or device: energy stays unknown
                self.handles = []

    def _read(self) -> list[int] | None:
        try:
            return [self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]
        except Exception:  # a GPU without the counter (before Volta) or a driver without it
            return None

    def start(self) -> None:
        self.first = (self._read() if self.handles else None) or []
        self.started = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        """{"energy_j": joules over the window or None, "gpus": how many, "window_s"}."""
        self.seconds = time.perf_counter() - self.started
        last = self._read() if self.first else None
        joules = (sum(last) - sum(self.first)) / 1e3 if last else None
        return {"energy_j": joules, "gpus": len(self.handles), "window_s": self.seconds}


def run_figures(per_rank: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    """The run's energy and cost from every rank's meter (`EnergyMeter.stop`) and the
    samples all ranks processed in the window: joules in all and per sample, GPU-hours,
    and cost per million samples where a price is set. Unknown (None) unless every GPU's
    counter was read."""
    gpus = sum(r["gpus"] for r in per_rank)
    known = gpus and all(r["energy_j"] is not None for r in per_rank)
    energy = sum(r["energy_j"] for r in per_rank) if known else None
    gpu_hours = sum(r["gpus"] * r["window_s"] for r in per_rank) / 3600 if gpus else None
    price = gpu_hour_price()
    return {
        "energy_j": energy,
        "energy_j_per_sample": energy / samples if energy is not None and samples else None,
        "gpu_hours": gpu_hours,
        "gpu_hour_price": price,
        "cost_per_million_samples": price * gpu_hours / samples * 1e6
        if price is not None and gpu_hours and samples else None,
    }
