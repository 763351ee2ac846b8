"""An input-bound run that reads shards (notebook 10's wds, litdata and mds variants): what
it waits on, and the change that helps, measured like for like.

What it waits on, in this order (the first that holds):

- stalls: one worker waited over 5x as long as another for its first samples, and a
  second or more (a reader that stalled: the others crossed the same link at its pace);
  or waits above 5x the median take STALL_SHARE or more of an epoch (a reader that stops
  for a shard now and then; under a bandwidth cap this is still a stall, not a slow link,
  since the median wait is short and the link idles between the bursts). The named case:
  Mosaic's forked workers under a link with 2 workers here waited its download_timeout
  (60 s) for their first shard, on the keep-alive S3 connection they inherited from the
  parent, which had fetched index.json (with the proxy closing every connection, or with
  workers started fresh, multiprocessing_context forkserver or spawn, they did not);
- the link: epoch 1 read its bytes at LINK_SHARE or more of the link's cap;
- the first shard: the cold first batch takes FIRST_SHARE or more of epoch 1;
- else the reader itself (decoding, too few workers).

A worker whose item time or start-up is twice the others' is named: more workers leave
it in the round-robin, so the advice is about it first. The change that helps is taken
from records of the same work differing in one knob (num_workers, prefetch_factor,
shard_mb, cache, multiprocessing_context), judged by the one verdict rule
(diagnose.advice.measured), else the `--try` command that measures it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from benchlib.diagnose import advice

STALL_SHARE = 0.2
STALL_FACTOR = 5.0  # as benchlib.shards.timing's
LINK_SHARE = 0.8
FIRST_SHARE = 0.2
KNOBS = ("num_workers", "prefetch_factor", "shard_mb", "cache", "multiprocessing_context")


def waits_on(m: dict[str, Any], p: dict[str, Any]) -> tuple[str, str]:
    """(stalls | the link | the first shard | the reader, the evidence in words)."""
    samples = m.get("samples") or 0
    rate = m.get("epoch1_samples_per_s")
    epoch1_s = samples / rate if rate else None
    slowest, fastest = m.get("worker_start_s"), m.get("worker_start_min_s")
    if slowest is not None and fastest is not None and slowest >= 1.0 \
            and slowest > STALL_FACTOR * fastest:
        return "stalls", (f"a worker waited {slowest:.1f} s for its first samples while another "
                          f"took {fastest:.2f} s through the same link: a reader stalled")
    if (m.get("stall_share") or 0) >= STALL_SHARE:
        return "stalls", (f"{m['stalls']:g} waits above 5x the median ({m['wait_p50_s'] * 1e3:.1f} "
                          f"ms) take {m['stall_s']:.2f} s an epoch, {m['stall_share']:.0%} of it")
    cap = p.get("link_mibps") or 0
    if cap and epoch1_s and m.get("bytes_read_epoch1"):
        achieved = m["bytes_read_epoch1"] / 2**20 / epoch1_s
        if achieved >= LINK_SHARE * cap:
            return "the link", (f"epoch 1 read {achieved:.1f} MiB/s over a link of {cap:g} "
                                "MiB/s")
    first = m.get("first_batch_cold_s")
    if first is not None and epoch1_s and first >= FIRST_SHARE * epoch1_s:
        return "the first shard", (f"the first batch came after {first:.2f} s cold, "
                                   f"{first / epoch1_s:.0%} of epoch 1")
    return "the reader", (f"batch wait p50 {(m.get('wait_p50_s') or 0) * 1e3:.1f} ms with "
                          f"{p.get('num_workers')} workers")


def _slow_worker(m: dict[str, Any]) -> str:
    if m.get("slow_worker") is None:
        return ""
    what = "per sample" if m["slow_worker_what"] == "item_s" else "to start"
    return (f"worker {m['slow_worker']} is slow ({m['slow_worker_s'] * 1e3:.1f} ms {what} "
            f"against {m['slow_worker_others_s'] * 1e3:.1f} ms for the others): look at its "
            "shards or its connection first; more workers leave it in the round-robin, where "
            f"every {m.get('workers_n') or 'N'}th batch waits on it; ")


SUGGESTED = {"stalls": ("prefetch_factor", "more batches fetched ahead (prefetch_factor)"),
             "the link": ("cache", "keep the cache (epoch 2 from local copies), or a faster link"),
             "the first shard": ("shard_mb", "smaller shards (shard_mb): the first arrives sooner"),
             "the reader": ("num_workers", "more DataLoader workers")}


def _wanted(knob: str, p: dict[str, Any]) -> Any:
    now = p.get(knob)
    if knob == "num_workers":
        return max(4, 2 * int(now or 0))
    if knob == "prefetch_factor":
        return 4 * int(now or 2)
    if knob == "shard_mb":
        return (now or 4) / 4
    return "keep"


def input_advice(record: dict[str, Any], same: pd.DataFrame | None) -> tuple[str, dict]:
    """What the shard reader waits on, and the one-knob changes measured here (the best
    first), else the suggested change and its `--try` command."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    cause, evidence = waits_on(m, p)
    head = f"waits on its store ({m.get('link', p.get('store'))}): {cause}, {evidence}; "
    found = []
    for knob in KNOBS:
        work = advice.same_work(same, record, knob)
        if work.empty or knob not in work:
            continue
        others = {v for v in work[knob].dropna() if advice._plain(v) != advice._plain(p.get(knob))}
        if not others:
            continue
        best = max(others, key=lambda v: work[work[knob] == v]["epoch1_samples_per_s"].median())
        sentence = advice.measured(record, same, knob, best)
        if sentence:
            found.append((work[work[knob] == best]["epoch1_samples_per_s"].median(), knob,
                          best, sentence))
    if found:
        found.sort(key=lambda f: -f[0])
        _, knob, best, _ = found[0]
        return (head + _slow_worker(m) + "; ".join(f"{k}={v}: {s}" for _, k, v, s in found),
                {knob: best})
    if cause == "stalls" and p.get("variant") == "mds" and "first samples" in evidence \
            and p.get("multiprocessing_context", "fork") == "fork":
        return (head + _slow_worker(m) + "the named case: Mosaic's workers share the keep-alive "
                "S3 connection the parent opened for index.json before the DataLoader forked "
                "them, and one waits out download_timeout (60 s) on it, or reads another's "
                "answer (samples of the wrong bytes); start each worker fresh, with a connection "
                "of its own: multiprocessing_context=forkserver (on the workbook's own store "
                "it read every sample, each worker slower to start: docs/studies.md); more "
                f"workers or prefetch do not move it; for this job, {advice.try_command(record)} "
                "measures it",
                {"multiprocessing_context": "forkserver"})
    knob, what = SUGGESTED[cause]
    if cause == "the link" and p.get("cache") != "drop":
        return (head + _slow_worker(m) + "the link is the limit and epoch 2 reads the cache "
                "already: fewer bytes (smaller or compressed samples) or a faster link; no "
                "loader knob moves it", {})
    wanted = _wanted(knob, p)
    return (head + _slow_worker(m) + f"{what}: {knob}={wanted}; {advice.not_measured(record)}",
            {knob: wanted})
