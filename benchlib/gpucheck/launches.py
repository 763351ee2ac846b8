"""A GPU check step of several launches (plan.yaml's `launches`): each a fresh process
with its own window, their figures combined as a study combines its launches
(studies.repeats, repeat_mode process: each launch one value), and its `target` judged
over them by core.stats.against_target.

The target's line says what was judged, how and on what: `PASS` only when every launch
reaches the target, `FAIL` when none does, `NOT JUDGED: launches disagree` in between, with
the median, the range and n; `NOT JUDGED` too where the figure is unknown (no published
peak), the device is not the one the target is for, or fewer than 3 launches gave one.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from benchlib.core.stats import MIN_TARGET_LAUNCHES, against_target
from benchlib.launch.launcher import LaunchResult
from benchlib.studies import repeats

# a target's figure: its name in the line, how a value and the target are written
SHOWN = {"mfu": ("MFU", "{:.1%}", "{:.0%}"), "samples_per_s": ("images/s", "{:,.0f}", "{:,.0f}")}


def combined(results: list[dict[str, Any]], seconds: list[float]) -> dict[str, Any]:
    """The launches' results as one (metrics, details), each launch one value of the
    spread: the study's own combination (studies.repeats.of_launches)."""
    launched = [LaunchResult(Path(), r, s) for r, s in zip(results, seconds)]
    metrics, details = repeats.of_launches("process", launched)
    return {"metrics": metrics, "details": details}


def judged(target: dict[str, Any], per_launch: list[dict[str, Any]], figures: dict[str, Any],
           precision: str, launches: int) -> dict[str, Any]:
    """The target's figures: the line (`target`), `target_met` (True, False, or None when
    not judged), and the median, range and n of the launches' values; `per_launch`: each
    launch's figures."""
    key, least = target["figure"], target["at_least"]
    name, value_fmt, target_fmt = SHOWN[key]
    device = figures.get("device_name") or "an unknown device"
    values = sorted(v for v in (f.get(key) for f in per_launch) if v is not None)
    spread = "" if not values else (
        f"{name} {value_fmt.format(statistics.median(values))} median (range "
        f"{value_fmt.format(values[0])}-{value_fmt.format(values[-1])}, n={len(values)} "
        "launches)")
    goal = target_fmt.format(least)
    rule = against_target(values, least) if values else None
    met = {"pass": True, "fail": False}.get(rule) if device_fits(target, device) else None
    if not device_fits(target, device):
        line = f"NOT JUDGED: the target is for one {target['device']}, this is {device}: {spread}"
    elif not values:
        line = f"NOT JUDGED: {name} unknown ({figures.get('mfu_peak_source', 'no figure')})"
    elif rule == "pass":
        line = f"PASS: {spread} >= {goal} target in every launch"
    elif rule == "fail":
        line = f"FAIL: {spread} < {goal} target in every launch"
    elif rule == "launches disagree":
        line = f"NOT JUDGED: launches disagree: {spread} against the {goal} target"
    else:
        line = (f"NOT JUDGED: {len(values)} of {launches} launches gave a figure, the rule "
                f"needs {MIN_TARGET_LAUNCHES}: {spread}")
    line += f"; {target['what']}, on {device}" + _basis(key, figures, precision)
    return {"target": line, "target_met": met, "target_at_least": least,
            "target_n": len(values), "target_median": statistics.median(values) if values else None,
            "target_min": values[0] if values else None,
            "target_max": values[-1] if values else None}


def device_fits(target: dict[str, Any], device: str) -> bool:
    return not target.get("device") or target["device"] in device


def _basis(key: str, m: dict[str, Any], precision: str) -> str:
    """How MFU was counted: the median rate, the FLOPs per token and their formula, the peak."""
    if key != "mfu" or not m.get("mfu_peak_flops") or "flops_per_token_analytic" not in m:
        return ""
    return (f": {m['tokens_per_s_per_device']:,.0f} tokens/s x "
            f"{m['flops_per_token_analytic']:,.0f} FLOPs per token by {m['mfu_formula']}, over "
            f"the dense {precision} peak {m['mfu_peak_flops'] / 1e12:,.1f} TFLOP/s "
            f"({m['mfu_peak_source']})")
