"""What a run reports, computed the same way for every trainer and study: a worker's
metrics less the study's parameters, and MFU, the one function every study and the GPU
check take it from (a float8 run's twice: over the dense bf16 peak, and over the peak its
share of FP8 FLOPs could reach, `mfu_fp8_weighted`)."""

from __future__ import annotations

from typing import Any

from benchlib import reference
from benchlib.config.choices import FP8_RECIPES
from benchlib.errors import RecordError

# a float8 run's MFU is over the dense bf16 peak (what it does not convert runs in bf16,
# and a fair A/B divides both sides by one peak); FP8's own dense peak is the csv's `fp8`
DENSE_PEAK_OF = dict.fromkeys(FP8_RECIPES, "amp_bf16")


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
    dense = DENSE_PEAK_OF.get(precision, precision)
    peak = reference.peak_flops(device_name, dense)
    if peak is None:
        return None, f"no published peak for {device_name} at {dense}"
    if not flops_per_item:
        return None, f"no FLOP count for this model (peak: {peak[1]})"
    source = peak[1] if dense == precision else f"the dense {dense} peak: {peak[1]}"
    return rate_per_s / devices * flops_per_item / peak[0], source


def fp8_weighted_peak(device_name: str, share: float | None) -> tuple[float | None, str]:
    """(peak FLOP/s, what it is) a float8 run could reach: `share` of its FLOPs at the
    device's dense FP8 peak and the rest at its dense bf16 peak, 1 / (s / P8 + (1 - s) /
    P16); (None, why) without both peaks or the share."""
    bf16, fp8 = (reference.peak_flops(device_name, p) for p in ("amp_bf16", "fp8"))
    if bf16 is None or fp8 is None:
        return None, f"no published FP8 and bf16 peaks for {device_name}"
    if share is None:
        return None, "no FLOP count for the share FP8 runs"
    peak = 1 / (share / fp8[0] + (1 - share) / bf16[0])
    return peak, (f"{share:.0%} of the FLOPs at the dense FP8 peak ({fp8[1]}), the rest at "
                  f"bf16's ({bf16[1]}): {peak / 1e12:,.0f} TFLOP/s")


def mfu_fp8_weighted(mfu_bf16: float | None, device_name: str,
                     share: float | None) -> dict[str, Any]:
    """A float8 run's MFU over its FP8-weighted peak (`fp8_weighted_peak`), from its MFU
    over the dense bf16 peak, with where that peak comes from (or why it is unknown)."""
    peak, source = fp8_weighted_peak(device_name, share)
    bf16 = reference.peak_flops(device_name, "amp_bf16")
    value = mfu_bf16 * bf16[0] / peak if peak is not None and mfu_bf16 is not None else None
    return {"mfu_fp8_weighted": value, "mfu_fp8_weighted_peak_source": source}


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
