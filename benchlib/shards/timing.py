"""Where a shard reader's time goes, per DataLoader worker and per batch.

`Timed` wraps a library's IterableDataset: in each worker it times the start-up (its
iterator made to its first sample: the connection, the index, the first shard) and every
sample after, and writes them to `<folder>/worker-<id>.json` when the worker's share of
the epoch ends. From the main process, every batch's wait is the loop's data time
(benchlib.core.loops); `waits` names its median, p99 and the stalls: waits above
STALL_FACTOR times the median, with their place in the epoch.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from torch.utils.data import IterableDataset, get_worker_info

STALL_FACTOR = 5.0  # a wait this many times the epoch's median is a stall
SLOW_FACTOR = 2.0  # a worker this many times slower than the others' median is named
DELAY_VAR = "BENCHLIB_INJECT_WORKER_DELAY"  # "ID:MS": worker ID sleeps MS per sample (tests)


class Timed(IterableDataset):
    """`inner`'s samples, decoded by `decode`, each worker's times written to `folder`;
    `env` (the store's variables) set in each worker first (benchlib.shards.read.in_worker);
    `worker_start` how its DataLoader starts them (benchlib.core.loops.shard_loader)."""

    def __init__(self, inner: Any, decode: Callable, folder: Path, env: dict | None = None,
                 worker_start: str | None = None):
        self.inner, self.decode, self.folder = inner, decode, Path(folder)
        self.env, self.worker_start = env or {}, worker_start

    def __iter__(self):
        from benchlib.shards.read import in_worker

        in_worker(self.env)
        info = get_worker_info()
        worker = info.id if info is not None else 0
        delay = 0.0
        if os.environ.get(DELAY_VAR, "").partition(":")[0] == str(worker):
            delay = float(os.environ[DELAY_VAR].partition(":")[2]) / 1e3
        start = time.perf_counter()
        items: list[float] = []
        it = iter(self.inner)
        while True:
            t = time.perf_counter()
            try:
                sample = next(it)
            except StopIteration:
                break
            if delay:
                time.sleep(delay)
            items.append(time.perf_counter() - t)
            yield self.decode(sample)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"worker-{worker}.json").write_text(json.dumps({
            "worker": worker, "pid": os.getpid(), "samples": len(items),
            "start_s": items[0] if items else time.perf_counter() - start,
            "item_s": statistics.median(items[1:]) if len(items) > 1 else None,
            "busy_s": sum(items)}))


def workers(folder: Path) -> list[dict]:
    """The workers' records of one epoch, by worker id."""
    return sorted((json.loads(p.read_text()) for p in Path(folder).glob("worker-*.json")),
                  key=lambda w: w["worker"])


def slow_workers(per_worker: list[dict]) -> list[dict]:
    """Workers whose item time or start-up is over SLOW_FACTOR times the others' median,
    each with what was slow: {worker, what, seconds, others_s}."""
    named = []
    for what in ("item_s", "start_s"):
        values = {w["worker"]: w[what] for w in per_worker if w.get(what) is not None}
        for worker, value in values.items():
            others = [v for k, v in values.items() if k != worker]
            if len(others) >= 1 and value > SLOW_FACTOR * statistics.median(others) \
                    and value - statistics.median(others) > 1e-3:
                named.append({"worker": worker, "what": what, "seconds": value,
                              "others_s": statistics.median(others)})
    return named


def waits(data_s: list[float]) -> dict[str, Any]:
    """An epoch's batch waits: median, p99, and the stalls (waits above STALL_FACTOR x the
    median): their count, seconds and places (the step, and its fraction of the epoch)."""
    if not data_s:
        return {"wait_p50_s": None, "wait_p99_s": None, "stalls": 0, "stall_s": 0.0,
                "stall_at": []}
    ordered = sorted(data_s)
    median = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    # the first batch is the start-up (first_batch_s), not a stall
    stalls = [(i, w) for i, w in enumerate(data_s)
              if i > 0 and w > STALL_FACTOR * median and w > 1e-3]
    return {"wait_p50_s": median, "wait_p99_s": p99, "stalls": len(stalls),
            "stall_s": sum(w for _, w in stalls),
            "stall_at": [{"step": i, "at": i / len(data_s), "wait_s": w} for i, w in stalls]}
