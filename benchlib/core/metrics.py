"""What a run reports, computed the same way for every trainer and study: a worker's
metrics less the study's parameters, and MFU, the one function every study and the GPU
check take it from."""

from __future__ import annotations

from typing import Any

from benchlib import reference
from benchlib.errors import RecordError


def without_params(metrics: dict[str, Any], params: Any) -> dict[str, Any]:
    """What a worker reported, less the names that are the study's parameters (a record
    keeps a name in one place); a reported value that differs from the asked one is an
    error, not a metric."""
    fields = getattr(params, "__dataclass_fields__", params)
    out = {}
    for name, value in metrics.items():
        if name not in fields:
            out[name] = value
        elif value != getattr(params, name, fields[name]):
            raise RecordError(f"{name}: the run reported {value!r}, "
                             f"{getattr(params, name, fields[name])!r} was asked for")
    return out


def mfu(rate_per_s: float, devices: int, flops_per_item: float | None, device_name: str,
        precision: str) -> tuple[float | None, str]:
    """(MFU, where the peak comes from): the achieved FLOP/s per device (`rate_per_s`
    items a second over `devices`, `flops_per_item` each: samples with their counted
    FLOPs, or tokens with a language model's analytic count) over the device's dense peak
    for the precision (benchlib/reference/peak_flops.csv). (None, why) without a FLOP
    count or a published peak: MFU unknown, never invented."""
    peak = reference.peak_flops(device_name, precision)
    if peak is None:
        return None, f"no published peak for {device_name} at {precision}"
    if not flops_per_item:
        return None, f"no FLOP count for this model (peak: {peak[1]})"
    return rate_per_s / devices * flops_per_item / peak[0], peak[1]


def mfu_figures(rate_per_s: float, devices: int, device_name: str, precision: str,
                analytic: float | None = None, counted: float | None = None) -> dict[str, Any]:
    """MFU (`mfu`, with `mfu_peak_source`: where the peak comes from, or why it is unknown)
    by the study's analytic FLOP count where it has one (benchlib's GPTs: 6N + 12·L·H·Q·T),
    else PyTorch's counted FLOPs (any other model: an hf: or entry-point one), and
    `mfu_flops` saying which (None: no count)."""
    flops, source = (analytic, "analytic") if analytic else \
        (counted, "counted") if counted else (None, None)
    value, peak_source = mfu(rate_per_s, devices, flops, device_name, precision)
    return {"mfu": value, "mfu_peak_source": peak_source, "mfu_flops": source}
