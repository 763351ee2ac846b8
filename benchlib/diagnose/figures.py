"""The figures diagnose's rules judge, each with its spread where the record keeps one:
each share of a step (waiting for data, the all-reduce nothing hid, the rank's own
compute) over steps and ranks, the slowest rank's skew over the others, and the point
figures: the start-up gap over the run's epochs, the checkpoint stall share over its
saves, a CUDA step over its epochs, and how many other tasks shared the job's cores
during the timed steps (benchlib.core.hostload.Contention). A figure holds its rule when
its whole spread is on the rule's side of the threshold, fails when none of it is, and
straddles it otherwise (`Share.state`): "borderline" in the verdict."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

HOLDS, STRADDLES, FAILS = "holds", "straddles", "fails"
# a record's during-run contention (hostload.state) as a rule's state
CONTENTION = {"contended": HOLDS, "borderline": STRADDLES, "alone": FAILS}


@dataclass(frozen=True)
class Share:
    """A figure with its spread: a share of a step, the skew, or a point figure (the
    start-up gap, the stall share, a CUDA step); low = high where none was kept. `n`: how
    many values the spread is over, where it is over epochs or saves (0: steps and ranks)."""

    value: float
    low: float
    high: float
    spread: bool = True
    n: int = 0

    def state(self, threshold: float, above: bool = True, strict: bool = False) -> str:
        """HOLDS where the whole spread is at or above `threshold` (beyond it, `strict`;
        below it, not `above`), FAILS where none of it is, else STRADDLES."""
        if not above:
            return HOLDS if self.high < threshold else FAILS if self.low >= threshold \
                else STRADDLES
        if strict:
            return HOLDS if self.low > threshold else FAILS if self.high <= threshold \
                else STRADDLES
        return HOLDS if self.low >= threshold else FAILS if self.high < threshold else STRADDLES

    def pct(self) -> str:
        return f"{self.value:.0%}" + (f" ({self.low:.0%}-{self.high:.0%})" if self.spread else "")


def point(value: float) -> Share:
    """A figure the record keeps no spread of."""
    return Share(value, value, value, spread=False)


def _share(m: dict[str, Any], name: str, fallback: float | None) -> Share | None:
    """`name` with its spread as the record keeps it, else the point `fallback` (an older
    record, or one built by hand)."""
    if m.get(name) is not None and m.get(f"{name}_low") is not None:
        return Share(m[name], m[f"{name}_low"], m[f"{name}_high"])
    return None if fallback is None else point(fallback)


def shares(m: dict[str, Any]) -> dict[str, Share | None]:
    """data, compute and exposed communication as shares of a step, with their spread over
    steps and ranks where the record keeps it; else from rank 0's mean times."""
    data, compute = m.get("data_s"), m.get("compute_s")
    points = {"data": None, "compute": None, "comm": None}
    if data is not None and compute is not None and data + compute > 0:
        step = data + compute
        exposed = m.get("comm_exposed_s")  # inside compute_s: the step's wait for the all-reduce
        points = {"data": data / step, "compute": max(compute - (exposed or 0.0), 0.0) / step,
                  "comm": exposed / step if exposed is not None else None}
    return {"data": _share(m, "data_share", points["data"]),
            "compute": _share(m, "compute_share", points["compute"]),
            "comm": _share(m, "comm_share", points["comm"])}


def rank_steps(record: dict[str, Any]) -> list[float]:
    """Each rank's own work per step, the median over the record's epochs: as each epoch
    keeps it (`rank_own_s`), else its mean step less the all-reduce time nothing hid on
    that rank. In synchronous DDP every rank's step lasts as long as the slowest's, the
    fast ones waiting inside the all-reduce: without that wait taken out, a straggler
    would not show."""
    kept = (record.get("details") or {}).get("epochs", [])
    own = [e["rank_own_s"] for e in kept if isinstance(e.get("rank_own_s"), list) and e["rank_own_s"]]
    if own:
        return [statistics.median(o[r] for o in own) for r in range(len(own[0]))]
    epochs = [e.get("rank_step_s") for e in kept]
    epochs = [e for e in epochs if isinstance(e, list) and e]
    if not epochs:
        return []
    steps = [statistics.median(e[r] for e in epochs if r < len(e)) for r in range(len(epochs[0]))]
    waits = (record.get("details") or {}).get("rank_comm_exposed_s")
    if isinstance(waits, list) and len(waits) == len(steps) and None not in waits:
        steps = [max(s - w, 0.0) for s, w in zip(steps, waits)]
    return steps


def skew_of(record: dict[str, Any]) -> tuple[int, Share, float] | None:
    """(the slowest rank, its skew over the others with its spread, its extra time as a
    share of a step), for a run of several ranks."""
    m, steps = record.get("metrics") or {}, rank_steps(record)
    if len(steps) < 2:
        return None
    slowest = max(range(len(steps)), key=steps.__getitem__)
    others = statistics.median(s for r, s in enumerate(steps) if r != slowest)
    # the others did nothing of their own (all waiting): any work of the slowest's stands out
    value = steps[slowest] / others if others > 0 else (float("inf") if steps[slowest] else 1.0)
    skew = _share(m, "rank_skew", value)
    step = (m.get("data_s") or 0) + (m.get("compute_s") or 0)
    return slowest, skew, (steps[slowest] - others) / step if step > 0 else 0.0


def startup_gap(m: dict[str, Any]) -> Share | None:
    """The steady rate over the whole-epoch rate (the user's epoch, projected where the
    run stopped short of it), with its spread over the run's epochs where kept."""
    gap = m.get("startup_gap")
    if gap is None:
        return None
    if m.get("startup_gap_n") and m.get("startup_gap_low") is not None:
        return Share(gap, m["startup_gap_low"], m["startup_gap_high"], n=m["startup_gap_n"])
    return point(gap)


def stall_share(m: dict[str, Any]) -> Share | None:
    """The share of its wall time saving checkpoints stalled training, with its spread at
    the p10 and p90 of a save's stall (as many saves, each as long as the p10 or the p90
    one): the share a rerun of as many saves reads where one save's stall varies."""
    share = m.get("checkpoint_stall_share")
    if share is None:
        return None
    n, stalled = m.get("checkpoint_blocking_s_n") or 0, m.get("checkpoint_stall_s")
    p10, p90 = m.get("checkpoint_blocking_s_p10"), m.get("checkpoint_blocking_s_p90")
    if n > 1 and stalled and share and p10 is not None and p90 is not None:
        wall = stalled / share
        return Share(share, n * p10 / wall, n * p90 / wall, n=int(n))
    return point(share)


def cuda_step(record: dict[str, Any]) -> Share | None:
    """A CUDA run's median step, with its spread over the run's epochs (each epoch's
    median step) where it ran several; None off CUDA."""
    m = record.get("metrics") or {}
    if m.get("device_type") != "cuda" or m.get("batch_s") is None:
        return None
    per = [e["batch_s"] for e in (record.get("details") or {}).get("epochs", [])
           if isinstance(e.get("batch_s"), (int, float))]
    return Share(m["batch_s"], min(per), max(per), n=len(per)) if len(per) > 1 \
        else point(m["batch_s"])


def contention(record: dict[str, Any]) -> tuple[str, bool]:
    """(the host-contended rule's state, whether it was measured during the timed steps):
    the record's during-run contention where it has one (contended holds, borderline
    straddles, alone fails), else, for a record older than it, the start sample's `busy`."""
    state = (record.get("metrics") or {}).get("host_contention")
    if state in CONTENTION:
        return CONTENTION[state], True
    return (HOLDS if (record.get("host_load") or {}).get("busy") else FAILS), False
