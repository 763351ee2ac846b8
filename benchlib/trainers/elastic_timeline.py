"""The elastic trainer's timeline: rank 0's append-only record of every step and event
across all attempts of a run (`<checkpoints>/timeline.jsonl`), and what the last attempt
reads from it: restarts, steps redone, recovery time, and the run's figures."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchlib.core import checkpoint_cost
from benchlib.core.stats import summarize
from benchlib.core.timing import PER_STEP

TIMELINE = "timeline.jsonl"


class Timeline:
    """Rank 0's append-only record: one JSON line per step and per event (start,
    checkpoint, validate, preempted, end), with a wall-clock time `t`. Other ranks
    hold an inactive one."""

    def __init__(self, folder: Path, active: bool, fresh: bool):
        self.path = folder / TIMELINE
        self.file = None
        self.attempt = 0
        if active:
            if fresh:
                self.path.unlink(missing_ok=True)
            self.attempt = sum(e["event"] == "start" for e in read_timeline(self.path))
            self.file = open(self.path, "a", buffering=1)  # noqa: SIM115 (open for the run)
            if self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n"):
                self.file.write("\n")  # a line a killed rank 0 left unfinished stays apart

    def write(self, event: str, **fields: Any) -> None:
        if self.file is not None:
            line = {"event": event, "t": time.time(), "attempt": self.attempt, **fields}
            self.file.write(json.dumps(line) + "\n")

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def read_timeline(path: Path) -> list[dict[str, Any]]:
    """The events; a last line cut off by a crash is left out."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def recoveries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per restart: what ended the attempt before it (failure or preemption), the
    last step it finished, the step it resumed from, the steps redone, and recovery_s:
    from that last finished step to the first step finished after the resume (failure
    detection, restart, rendezvous, loading, and the first step), and restart_s, the part
    of it until the resumed attempt's `start` (everything but the first step)."""
    rows: list[dict[str, Any]] = []
    last_step: dict[str, Any] | None = None
    last_kind, since = None, None
    for e in events:
        kind = e["event"]
        if kind == "start" and e["attempt"] > 0 and last_kind == "end":
            pass  # a launch after the run had ended (a requeue, a second submission): no restart
        elif kind == "start" and e["attempt"] > 0:
            _never_stepped(rows)
            done = last_step["step"] if last_step else 0
            resumed = e.get("resumed_from_step") or 0
            since = last_step["t"] if last_step else None
            rows.append({"attempt": e["attempt"],
                         "cause": "preempted" if last_kind == "preempted" else "failure",
                         "last_step_before": done, "resumed_from_step": resumed,
                         "steps_redone": done - resumed,
                         "restart_s": e["t"] - since if since is not None else None})
        elif kind == "step":
            if rows and "recovery_s" not in rows[-1]:
                rows[-1]["recovery_s"] = e["t"] - since if since is not None else None
            last_step = e
        last_kind = kind
    _never_stepped(rows)  # preempted at the last step: the resumed launch had none to do
    return rows


def _never_stepped(rows: list[dict[str, Any]]) -> None:
    """The latest restart's attempt ended without finishing a step: no recovery to time."""
    if rows and "recovery_s" not in rows[-1]:
        rows[-1].update(recovery_s=None, steps_redone=0)


def summarize_run(events: list[dict[str, Any]], warmup_steps: int,
                  mode: str = "torch_save") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, one row per restart) from the timeline of all the run's attempts.
    Time lost to a restart = recovery_s + redo_s (the time spent on the steps redone);
    of recovery_s, first_step_after_restart_s passed after the resumed attempt started
    (restoring the checkpoint, then its first step). What the saves cost, and the rate with
    checkpoints against the rate without, are benchlib.core.checkpoint_cost's."""
    steps = [e for e in events if e["event"] == "step"]
    rows = recoveries(events)
    timed, seen = [], {}
    for e in steps:  # each attempt warms up again (fresh processes, caches, allocator)
        seen[e["attempt"]] = seen.get(e["attempt"], 0) + 1
        if seen[e["attempt"]] > warmup_steps:
            timed.append(e)
    redo_s = 0.0
    for r in rows:
        redo_s += sum(e["step_s"] for e in steps if e["attempt"] == r["attempt"]
                      and r["resumed_from_step"] < e["step"] <= r["last_step_before"])
    # a timeline begun before issue 41 had a torch.save's whole time as save_s
    saves = [{"blocking_s": e.get("save_s"), "total_s": e.get("save_s"), **e}
             for e in events if e["event"] == "checkpoint"]
    stalls = {(e["attempt"], e["step"]): e["blocking_s"] for e in saves}
    accs = [e["acc1_pct"] for e in events if e["event"] == "validate"]
    restores = [e["restore_s"] for e in events if e["event"] == "start" and e.get("restore_s")]
    wall = events[-1]["t"] - events[0]["t"] if events else 0.0  # every attempt, restarts too

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    return {
        **summarize([e["samples"] / e["step_s"] for e in timed], "samples_per_s",
                     independent=False),
        "timing": PER_STEP,
        "step_s": median([e["step_s"] for e in timed]),
        "data_s": median([e["data_s"] for e in timed]),
        "compute_s": median([e["step_s"] - e["data_s"] for e in timed]),
        "attempts": sum(e["event"] == "start" for e in events),
        "restarts": len(rows),
        "steps_redone": sum(r["steps_redone"] for r in rows),
        "recovery_s": sum((r["recovery_s"] or 0.0 for r in rows), 0.0),
        "restart_s": sum((r["restart_s"] or 0.0 for r in rows if r["recovery_s"]), 0.0),
        "first_step_after_restart_s": sum((r["recovery_s"] - (r["restart_s"] or 0.0)
                                           for r in rows if r["recovery_s"]), 0.0),
        "redo_s": redo_s,
        "final_step": steps[-1]["step"] if steps else 0,
        "loss_last": steps[-1]["loss"] if steps else None,
        "best_acc1_pct": max(accs) if accs else None,
        **checkpoint_cost.figures(saves, restores, mode),
        "checkpoint_stall_share": sum(e["blocking_s"] for e in saves) / wall if wall else None,
        **checkpoint_cost.rates([{**e, "stall_s": stalls.get((e["attempt"], e["step"])),
                                  "saved": (e["attempt"], e["step"]) in stalls} for e in timed]),
    }, rows
