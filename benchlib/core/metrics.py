"""What a run reports, computed the same way for every trainer and study."""

from __future__ import annotations

from typing import Any

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


FLOP_SOURCES = {"analytic": "the study's analytic count", "counted": "PyTorch's counted FLOPs "
                "(torch.utils.flop_counter, one training step on a batch of 2)"}


def mfu(rate_per_device: float | None, device_name: str | None, precision: str,
        analytic: float | None = None, counted: float | None = None) -> dict[str, Any]:
    """Model FLOPs utilisation: a device's rate (samples or tokens per second) times the
    FLOPs of one (sample or token) over the device's dense peak at `precision`
    (benchlib/reference/peak_flops.csv). The FLOPs are the study's analytic count where it
    has one, PyTorch's counted ones otherwise; `mfu_flops` says which. Where MFU is None,
    `mfu_peak_source` says the true reason (no FLOP count, no rate, no published peak);
    else where the peak comes from."""
    from benchlib import reference

    flops, source = (analytic, "analytic") if analytic else \
        (counted, "counted") if counted else (None, None)
    peak = reference.peak_flops(device_name or "", precision) if device_name else None
    if flops is None:
        why = "no FLOP count in the record (flops_per_sample)"
    elif not rate_per_device:
        why = "no throughput to divide"
    elif peak is None:
        why = f"no published peak for {device_name or 'this device'} at {precision}"
    else:
        return {"mfu": rate_per_device * flops / peak[0], "mfu_peak_source": peak[1],
                "mfu_flops": source, "mfu_peak_flops": peak[0]}
    return {"mfu": None, "mfu_peak_source": why, "mfu_flops": source, "mfu_peak_flops": None}
