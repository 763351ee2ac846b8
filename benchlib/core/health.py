"""What `doctor --health` measures on each device, and the outlier rule its report and
`compare` share: a timed square matmul (TFLOP/s), host-to-device copy bandwidth on a GPU
(pinned memory), and the figures more than 10% below the median of their kind."""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

TOLERANCE = 0.10  # more than this far below the median is an outlier
DTYPES = {"bf16": "bfloat16", "fp32": "float32"}  # torch's names (imported when measuring)
# (size, repeats) when none are given: about a second per rank on a CPU core; a
# compute-bound matmul of some tens of milliseconds on a GPU
CPU_MATMUL = (1024, 20)
CUDA_MATMUL = (8192, 50)


def matmul_shape(device: torch.device, size: int | None, repeats: int | None,
                 dtype: str) -> tuple[int, int, str]:
    """The matmul's size, repeats and dtype name (auto: bf16 on CUDA, fp32 on a CPU)."""
    default = CUDA_MATMUL if device.type == "cuda" else CPU_MATMUL
    if dtype == "auto":
        dtype = "bf16" if device.type == "cuda" else "fp32"
    return size or default[0], repeats or default[1], dtype


def matmul_tflops(device: torch.device, size: int, repeats: int, dtype: str = "fp32",
                  slow_factor: float = 1.0) -> float:
    """Achieved TFLOP/s of `repeats` (size x size) @ (size x size) products, after a
    warm-up that is not timed; CUDA events on a GPU. `slow_factor` > 1 does the work that
    many times over while counting it once: a fault, so that the device reads slower."""
    import torch

    a = torch.randn(size, size, device=device, dtype=getattr(torch, DTYPES[dtype]))
    b = torch.randn(size, size, device=device, dtype=getattr(torch, DTYPES[dtype]))
    for _ in range(3):
        torch.mm(a, b)
    runs = max(1, round(repeats * slow_factor))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(runs):
            torch.mm(a, b)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
    else:
        began = time.perf_counter()
        for _ in range(runs):
            torch.mm(a, b)
        seconds = time.perf_counter() - began
    return 2 * size**3 * repeats / seconds / 1e12


def h2d_gbps(device: torch.device, nbytes: int = 256 * 2**20, repeats: int = 10) -> float | None:
    """Host-to-device copy bandwidth from pinned memory (GB/s, median of `repeats`);
    None on a CPU, where there is no such copy."""
    if device.type != "cuda":
        return None
    import torch

    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dev.copy_(host, non_blocking=True)  # warm-up
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dev.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return nbytes / statistics.median(times) / 1e9


def device_name(device: torch.device) -> str:
    """`cpu`, or `cuda:0 NVIDIA H100 80GB HBM3`."""
    if device.type != "cuda":
        return device.type
    import torch

    return f"{device} {torch.cuda.get_device_name(device)}"


def add_flags(parser: argparse.ArgumentParser) -> None:
    """`--health` and its flags: the doctor worker's and `benchlib doctor`'s, declared once."""
    h = parser.add_argument_group("health")
    h.add_argument("--health", action="store_true",
                   help="also time a matmul per device (TFLOP/s), host-to-device copies on "
                   "a GPU, an all-reduce per pair of nodes; name what is >10%% below the median")
    h.add_argument("--matmul-size", type=int,
                   help=f"the square matmul's side (default {CPU_MATMUL[0]} on a CPU, "
                   f"{CUDA_MATMUL[0]} on a GPU)")
    h.add_argument("--matmul-repeats", type=int,
                   help=f"timed matmuls after the warm-up (default {CPU_MATMUL[1]} on a CPU, "
                   f"{CUDA_MATMUL[1]} on a GPU)")
    h.add_argument("--matmul-dtype", default="auto", choices=["auto", *DTYPES],
                   help="auto: bf16 on a GPU, fp32 on a CPU")
    h.add_argument("--slow-rank", type=int,
                   help="a fault on purpose: this rank's matmul is --slow-factor times slower")
    h.add_argument("--slow-factor", type=float, default=2.0,
                   help="with --slow-rank: how many times slower (default 2)")


def check_flags(args: argparse.Namespace) -> None:
    """The health flags, before any rank starts; ConfigError names the flag."""
    from benchlib.errors import ConfigError

    if not args.health:
        given = [f for f in ("matmul_size", "matmul_repeats", "slow_rank")
                 if getattr(args, f) is not None]
        if given:
            raise ConfigError(given[0], "only means something with --health")
    for name in ("matmul_size", "matmul_repeats"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise ConfigError(name, f"must be >= 1, got {getattr(args, name)}")
    if not args.slow_factor >= 1:
        raise ConfigError("slow_factor", f"must be >= 1, got {args.slow_factor}")


@dataclass
class Outlier:
    name: str  # what is slow, as the line names it: `rank 1 on vm (cpu)`
    value: float
    median: float

    @property
    def below(self) -> float:
        """How far below the median, as a fraction (0.48: 48% below)."""
        return 1 - self.value / self.median


def outliers(values: dict[str, float], tolerance: float = TOLERANCE) -> list[Outlier]:
    """The entries more than `tolerance` below the median of all of them (exactly
    `tolerance` below is not an outlier), slowest first."""
    if not values:
        return []
    median = statistics.median(values.values())
    if median <= 0:
        return []
    out = [Outlier(name, v, median) for name, v in values.items()
           if (median - v) / median > tolerance + 1e-9]
    return sorted(out, key=lambda o: o.value)


def outlier_lines(devices: dict[str, float], pairs: dict[str, float],
                  tolerance: float = TOLERANCE) -> list[str]:
    """One line per slow device and per slow node pair; one line when there is none."""
    lines = [f"doctor: slow device: {o.name}: {o.value:.3g} TFLOP/s, {o.below:.0%} below the "
             f"median {o.median:.3g}" for o in outliers(devices, tolerance)]
    lines += [f"doctor: slow node pair: {o.name}: busbw {o.value:.3g} GB/s, {o.below:.0%} "
              f"below the median {o.median:.3g}" for o in outliers(pairs, tolerance)]
    if lines:
        return lines
    median = statistics.median(devices.values()) if devices else 0.0
    where = (f", every node pair within {tolerance:.0%} of the median busbw "
             f"{statistics.median(pairs.values()):.3g} GB/s" if len(pairs) > 1 else "")
    return [f"doctor: no outlier: every device within {tolerance:.0%} of the median "
            f"{median:.3g} TFLOP/s{where}"]
