"""The change each verdict suggests, and what this testbed measured of it, like for like.

A "measured" figure comes only from records of the same work: the same study, testbed and
parameters (model, data set, variant and mode, batch, device, precision, ranks, ...) but
for the one knob the advice changes, judged by the one verdict rule
(benchlib.analysis.sides: the ratio of medians with its interval and n; a direction only
from 5 or more launches a side). Where no such records exist the advice says "not
measured here" and gives the command that measures it (`diagnose RUN --try --launches 5`).
No advice names a parameter the run's study does not have.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from benchlib.analysis import sides
from benchlib.analysis.claims import value
from benchlib.core.stats import MIN_LAUNCHES

# parameters that say how a row was run or kept, not what work it did
NOT_WORK = ("repeats", "repeat_mode", "seed", "timeout_s", "log_interval", "export_trace",
            "profile", "allreduce", "allreduce_max_bytes", "record_losses", "save_model",
            "train_dir", "epochs")


def _plain(v: Any) -> str:
    """A parameter's value as one text whether it came from a record or a frame's cell."""
    if isinstance(v, dict):  # a frame holds a mapping as its JSON text
        v = json.dumps(v, sort_keys=True)
    if isinstance(v, float) and v.is_integer():
        return repr(int(v))
    return repr(v)


def same_work(frame: pd.DataFrame | None, record: dict[str, Any], knob: str) -> pd.DataFrame:
    """The ok records of `frame` (one testbed's) that did the record's work: its study and
    every parameter of it but `knob` (and NOT_WORK's) equal; their steady rate not taken
    from a window of prefetched batches only."""
    if frame is None or frame.empty or "study" not in frame:
        return pd.DataFrame()
    params = {k: v for k, v in (record.get("params") or {}).items()
              if k not in NOT_WORK and k != knob}
    rows = frame[(frame["study"] == record.get("study")) & (frame["status"] == "ok")]
    keep = [i for i, row in rows.iterrows()
            if all(_plain(value(row, k)) == _plain(v) for k, v in params.items())
            and value(row, "window_prefetched_only") is not True]
    return rows.loc[keep]


def measured(record: dict[str, Any], same: pd.DataFrame | None, knob: str,
             wanted: Any) -> str:
    """'measured here: num_workers=4 x2.30 of num_workers=0 (95% CI ..., n=5 launches
    each; ...)' from records of the same work, else '' (nothing like for like). Whole-epoch
    rates where either side's steady rate hides its start-up."""
    work = same_work(same, record, knob)
    if work.empty or knob not in work:
        return ""
    now = (record.get("params") or {}).get(knob)
    base = work[[_plain(value(r, knob)) == _plain(now) for _, r in work.iterrows()]]
    new = work[[_plain(value(r, knob)) == _plain(wanted) for _, r in work.iterrows()]]
    if base.empty or new.empty:
        return ""
    col, what = "samples_per_s", "samples/s"
    hidden = pd.concat([base, new]).get("startup_hidden")
    if hidden is not None and hidden.eq(True).any():
        col, what = "epoch_samples_per_s", "whole-epoch samples/s (a steady rate hides start-up)"
    a, b = sides.side(f"{knob}={wanted}", new, col), sides.side(f"{knob}={now}", base, col)
    return f"measured here, {what}: {sides.judged(a, b)}"


def try_command(record: dict[str, Any]) -> str:
    return f"`python -m benchlib diagnose {record.get('run_id', 'RUN')} --try --launches {MIN_LAUNCHES}`"


def not_measured(record: dict[str, Any]) -> str:
    return f"not measured here: {try_command(record)} measures it"


def input_advice(record: dict[str, Any], same: pd.DataFrame | None) -> tuple[str, dict]:
    """More DataLoader workers: what the same work measured with more, else the command."""
    p = record.get("params") or {}
    if "num_workers" not in p:
        return "the data path: this study has no DataLoader workers to add", {}
    workers = int(p.get("num_workers") or 0)
    wanted, found = max(4, 2 * workers), ""
    work = same_work(same, record, "num_workers")
    more = sorted({int(w) for w in work.get("num_workers", pd.Series(dtype=float)).dropna()
                   if w > workers}) if not work.empty else []
    if more:  # the best of the counts measured, by median
        medians = {w: work[work["num_workers"] == w]["samples_per_s"].median() for w in more}
        wanted = max(medians, key=medians.get)
        found = measured(record, same, "num_workers", wanted)
    return (f"more DataLoader workers (now {workers}): num_workers={wanted}; "
            f"{found or not_measured(record)}", {"num_workers": wanted})


def compute_advice(record: dict[str, Any], same: pd.DataFrame | None) -> tuple[str, dict]:
    """Faster arithmetic where the study sets precision (bf16 where fp32 ran), measured like
    for like or the command; otherwise less arithmetic per sample."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    on = "GPU" if m.get("device_type") == "cuda" else "CPU"
    fewer = "fewer FLOPs per sample (a smaller model or input) or more devices"
    if "precision" not in p:
        return (f"the {on} computes most of each step: {fewer}; this study has no precision "
                "setting (notebooks 40 and 50 have one)", {})
    if p["precision"] != "fp32":
        return (f"the {on} computes most of each step in {p['precision']}: {fewer}"
                + ("; torch.compile (compile) fuses what remains" if "compile" in p
                   and not p["compile"] else ""), {})
    found = measured(record, same, "precision", "amp_bf16")
    unit = "" if on == "GPU" else \
        " (a CPU gains from bf16 only with bf16 units: AMX or AVX512-BF16)"
    return (f"the {on} computes most of each step: mixed precision (precision amp_bf16){unit}; "
            f"{found or not_measured(record)}", {"precision": "amp_bf16"})


def comm_advice(record: dict[str, Any], share: float,
                same: pd.DataFrame | None) -> tuple[str, dict]:
    """What the communication measurements support: overlap where backward hid little,
    fewer bytes (the gradients' size), fewer all-reduces per sample (a larger batch), and
    the link's speed from the bytes and the time."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    parts = [f"{share:.0%} of each step is all-reduce backward does not hide"]
    hidden = m.get("comm_hidden_fraction")
    if hidden is not None and hidden < 0.5:
        parts.append(f"overlap: backward hid {hidden:.0%} of it; smaller gradient buckets "
                     "(DDP's bucket_cap_mb) start the all-reduce sooner")
    grads = (m.get("model_params") or 0) * 4
    if grads and m.get("comm_s"):
        parts.append(f"fewer bytes: {grads / 2**20:,.0f} MiB of fp32 gradients a step, "
                     f"{grads / m['comm_s'] / 1e9:.2f} GB/s as the hook timed them; bf16 "
                     "gradients (DDP's bf16_compress_hook) halve them")
    if m.get("busbw_gbps"):
        parts.append(f"the link: the all-reduce benchmark of this run measured "
                     f"{m['busbw_gbps']:.2f} GB/s bus bandwidth")
    else:
        parts.append("the link: `python -m benchlib allreduce` measures what it gives")
    change = {}
    if p.get("batch_size"):
        change = {"batch_size": 2 * int(p["batch_size"])}
        found = measured(record, same, "batch_size", change["batch_size"])
        parts.append(f"fewer all-reduces per sample: batch_size {change['batch_size']}; "
                     f"{found or not_measured(record)}")
    return "; ".join(parts), change


def startup_advice(record: dict[str, Any]) -> str:
    m, p = record.get("metrics") or {}, record.get("params") or {}
    first = m.get("first_batch_s")
    workers = p.get("num_workers")
    text = (f"the epoch's start, not its steady state, holds the run back: the first batch "
            f"came after {first:.3g} s" if first is not None else
            "the epoch's start, not its steady state, holds the run back")
    text += ("; look at what an item costs on its first read (slow storage, a cold cache, "
             "files opened per worker)")
    if workers:
        text += (f"; {workers} workers each read their first batches at once, and where the "
                 "reads share one disk or a few cores, fewer workers start sooner")
    return text + "; the steady rate holds only after it, and no speedup is taken from it"


def checkpoint_advice(m: dict[str, Any], p: dict[str, Any],
                       run_id: str) -> tuple[str, dict[str, Any]]:
    """A blocking save made asynchronous; an asynchronous one (or any) less often, at the
    interval Young/Daly gives for the cluster's MTBF."""
    every = p.get("checkpoint_every")
    how = (f"save less often: `python -m benchlib project --mtbf 12h --checkpoint-run "
           f"{run_id}` gives the interval that maximises goodput for an MTBF")
    if m.get("checkpoint_mode") in ("torch_save", "dcp"):
        return (f"saves block training: `checkpoint dcp_async` writes in the background; or "
                f"{how}", {"checkpoint": "dcp_async"})
    return how, ({"checkpoint_every": 2 * int(every)} if every else {})
