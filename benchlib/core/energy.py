"""Energy, utilisation and cost of a training run's timed window.

NVML's total-energy counter (millijoules since the driver loaded, Volta and newer) is read
at the edges of the window samples/s is timed over: after the warm-up steps (and the
compile they hold) and after the last step, the device synchronized before each read, so
the joules are those of the timed steps and `energy_j_per_sample` divides them by the
timed samples. What the loop drew outside that window (warm-up, compile, the epochs'
starts) is kept apart (`energy_untimed_j`). GPU utilisation and the host's CPU use are
averaged over the same window where a sample fell in it.

A GPU is found in NVML by its UUID (`torch.cuda.get_device_properties(i).uuid`), not by
its CUDA index: under CUDA_VISIBLE_DEVICES=2,3 CUDA's device 0 is NVML's GPU 2, and reading
NVML's GPU 0 would read another job's GPU.

With a price per GPU-hour set for the testbed (BENCHLIB_GPU_HOUR_PRICE, in any currency),
the cost per million samples of the timed window. Where no counter is readable (a CPU, a
GPU or driver without it) every figure is None: "unknown", never an invented one."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
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


def device_uuids(indices: list[int]) -> list[str]:
    """NVML's names of the CUDA devices `indices` (CUDA's own numbering, after
    CUDA_VISIBLE_DEVICES): `GPU-<uuid>`, as nvmlDeviceGetHandleByUUID takes them."""
    import torch

    out = []
    for i in indices:
        uuid = str(torch.cuda.get_device_properties(i).uuid)
        out.append(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
    return out


def nvml_handles(uuids: list[str], nvml: Any = None) -> tuple[Any, list[Any]]:
    """(the NVML module, a handle per UUID); no handles where NVML or a device is not
    there. `nvml`: the module to use (pynvml, nvidia-ml-py's; a stand-in in tests)."""
    if not uuids:
        return None, []
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
        return nvml, [nvml.nvmlDeviceGetHandleByUUID(u) for u in uuids]
    except Exception:  # no NVML library or device: energy and utilisation stay unknown
        return nvml, []


class EnergyMeter:
    """NVML's energy counters of the GPUs `uuids` name, split at the timed window's edges:
    `start()` where the loop begins, `timed()` at the first timed step of an epoch,
    `untimed()` after its last, `stop()` at the end. Each edge calls `sync()` (the devices
    synchronized: what was queued has run) before it reads."""

    def __init__(self, uuids: list[str], sync: Callable[[], None] | None = None,
                 nvml: Any = None):
        self.nvml, self.handles = nvml_handles(uuids, nvml)
        self.sync = sync or (lambda: None)
        self.in_timed = False
        self.joules = {True: 0.0, False: 0.0}  # timed, untimed
        self.seconds = {True: 0.0, False: 0.0}
        self.readable = bool(self.handles)
        self._last: tuple[list[int] | None, float] = (None, 0.0)

    def _read(self) -> list[int] | None:
        if not self.readable:
            return None
        try:
            return [self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]
        except Exception:  # a GPU without the counter (before Volta) or a driver without it
            self.readable = False
            return None

    def _edge(self, timed: bool) -> None:
        """Close the segment since the last edge (its joules and seconds to the state it
        was in) and open one in `timed`."""
        if self.handles:
            self.sync()
        reading, now = self._read(), time.perf_counter()
        before, then = self._last
        if before is not None and reading is not None:
            self.joules[self.in_timed] += (sum(reading) - sum(before)) / 1e3
        if then:
            self.seconds[self.in_timed] += now - then
        self._last, self.in_timed = (reading, now), timed

    def start(self) -> None:
        self._edge(False)

    def timed(self) -> None:
        self._edge(True)

    def untimed(self) -> None:
        self._edge(False)

    def stop(self) -> dict[str, Any]:
        """{"energy_j": joules over the timed steps or None, "energy_untimed_j": the rest
        of the loop (warm-up, compile), "gpus": how many, "window_s": the timed seconds,
        "untimed_s"}."""
        self._edge(False)
        known = self.readable
        return {"energy_j": self.joules[True] if known else None,
                "energy_untimed_j": self.joules[False] if known else None,
                "gpus": len(self.handles), "window_s": self.seconds[True],
                "untimed_s": self.seconds[False]}


class UtilisationSampler(threading.Thread):
    """GPU utilisation (NVML, the GPUs `uuids` name) and the host's CPU use (psutil),
    sampled every `interval_s` in the background; `window` (an EnergyMeter) says whether a
    sample fell in the timed window, and the means are over those samples where there are
    any (else over the whole loop, and `util_window` says so)."""

    def __init__(self, uuids: list[str], window: EnergyMeter, interval_s: float = 0.2,
                 nvml: Any = None):
        super().__init__(daemon=True)
        self.interval_s, self.window = interval_s, window
        self.samples: list[tuple[bool, float, list[int]]] = []  # timed, cpu %, gpu %s
        self._stop_event = threading.Event()
        self._nvml, self._handles = nvml_handles(uuids, nvml)

    def run(self) -> None:
        import psutil

        psutil.cpu_percent(None)
        while not self._stop_event.wait(self.interval_s):
            gpus = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
            self.samples.append((self.window.in_timed, psutil.cpu_percent(None), gpus))

    def stop(self) -> dict[str, Any]:
        self._stop_event.set()
        self.join()
        timed = [s for s in self.samples if s[0]]
        chosen = timed or self.samples
        mean = lambda v: sum(v) / len(v) if v else None  # noqa: E731
        return {"gpu_util_pct": mean([g for s in chosen for g in s[2]]),
                "cpu_util_pct": mean([s[1] for s in chosen]),
                "util_window": "timed steps" if timed else
                "the whole loop (no sample fell in the timed steps)" if chosen else None}


def run_figures(per_rank: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    """The run's energy and cost from every rank's meter (`EnergyMeter.stop`) and the
    samples all ranks processed in the timed window: joules in all and per sample,
    GPU-hours, and cost per million samples where a price is set, all of the timed window;
    the warm-up's and compile's joules and GPU-hours apart. Unknown (None) unless every
    GPU's counter was read."""
    gpus = sum(r["gpus"] for r in per_rank)
    known = gpus and all(r["energy_j"] is not None for r in per_rank)
    energy = sum(r["energy_j"] for r in per_rank) if known else None
    untimed = sum(r.get("energy_untimed_j") or 0.0 for r in per_rank) if known else None
    gpu_hours = sum(r["gpus"] * r["window_s"] for r in per_rank) / 3600 if gpus else None
    price = gpu_hour_price()
    return {
        "energy_j": energy,
        "energy_j_per_sample": energy / samples if energy is not None and samples else None,
        "energy_untimed_j": untimed,
        "gpu_hours": gpu_hours,
        "gpu_hours_untimed": sum(r["gpus"] * r.get("untimed_s", 0.0) for r in per_rank) / 3600
        if gpus else None,
        "gpu_hour_price": price,
        "cost_per_million_samples": price * gpu_hours / samples * 1e6
        if price is not None and gpu_hours and samples else None,
    }
