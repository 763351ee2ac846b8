"""Notebook 10's shard variants (wds, litdata, mds): the input pipeline a job that does not
fit in memory has, read by each library from a folder or an object store through a link
of a given bandwidth and latency, measured from the first batch to the second epoch.

Every repeat starts cold: a fresh reader, fresh DataLoader workers and an empty cache
folder; its epochs then read as the library does (`cache: keep`: the second epoch from the
copies the first one kept; `drop`: from the store again). Per epoch: the first batch, the
whole-epoch rate, every batch's wait (p50, p99, and the stalls: waits above 5x the median,
with their place in the epoch), each worker's start-up and item time
(benchlib.shards.timing), and what crossed the link: bytes, requests, shards fetched
(benchlib.store.link).
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader

from benchlib import paths
from benchlib.core import loops
from benchlib.core.stats import summarize
from benchlib.errors import BenchlibError, ConfigError, StoreFailed
from benchlib.shards import prepare as shard_prep
from benchlib.shards import read, timing, write
from benchlib.store import link as links
from benchlib.store import s3, server


def samples(cfg: Any) -> int:
    """The preflight's check of the row's shards (source), and their sample count; a store
    started for it is stopped again."""
    with source(cfg) as (_, index, _env):
        return index["samples"]


@contextlib.contextmanager
def source(cfg: Any) -> Iterator[tuple[str, dict, dict[str, str]]]:
    """(where the shards are: a folder or s3://, their index, the store's variables), each
    checked: a folder written by `benchlib data --shards`, or a store that answers, takes
    the keys, has the bucket and prefix, and holds every shard whole (one line each). The
    workbook's store runs for the while (started here if it was not running)."""
    write.library(cfg.variant)
    if cfg.store == "local":
        folder = shard_prep.local_folder(paths.resolve(cfg.path), cfg.dataset, cfg.variant,
                                         cfg.shard_mb)
        if not folder.is_dir():
            raise ConfigError("shard_mb", f"no {cfg.variant} shards of {cfg.shard_mb:g} MB at "
                              f"{folder}: write them with `benchlib data --path {cfg.path} "
                              f"--dataset {cfg.dataset} --shards {cfg.variant} "
                              f"--shard-mb {cfg.shard_mb:g}`")
        yield str(folder), write.read_index(folder), {}
        return
    url = cfg.store_url or shard_prep.default_url(cfg.dataset, cfg.variant, cfg.shard_mb)
    with shard_prep.store_env(cfg.store_endpoint) as env:
        yield url, s3.check_shards(url, env), env


def loader(cfg: Any, ds: Any, index: dict, folder: Path, device: torch.device,
           env: dict[str, str] | None = None) -> DataLoader:
    """A DataLoader over the library's reader, each worker timed into `folder` and given
    the store's variables `env`."""
    timed = timing.Timed(ds, read.decoder(cfg.variant, index), folder, env,
                         cfg.multiprocessing_context)
    return loops.shard_loader(timed, None, cfg.batch_size, cfg.num_workers, device,
                              cfg.prefetch_factor)


def _epoch(times, warmup: int, shard_names: set[str], counted: dict | None,
           folder: Path) -> dict[str, Any]:
    """One epoch's figures from the loop's times, the workers' files and the link's counts."""
    per_worker = timing.workers(folder)
    d, c, n = times.timed()
    figures = {"timed": (d, c, n), "loss": (times.loss_first, times.loss_last),
               "steps": {"data_s": times.data_s, "compute_s": times.compute_s,
                         "warmup": times.warmup},
               "warmup_s": sum(times.data_s[:warmup]) + sum(times.compute_s[:warmup]),
               "epoch_s": times.epoch_s, "first_batch_s": times.data_s[0],
               "samples": sum(times.samples),
               "epoch_samples_per_s": sum(times.samples) / times.epoch_s,
               "data_s": sum(times.data_s), "step_s": sum(times.data_s) + sum(times.compute_s),
               **timing.waits(times.data_s), "workers": per_worker,
               "worker_start_s": max((w["start_s"] for w in per_worker), default=None)}
    if counted is not None:
        fetched = {k.rsplit("/", 1)[-1] for k in counted["gets"]} & shard_names
        figures.update({"bytes_read": counted["bytes_out"], "requests": counted["requests"],
                        "shards_fetched": len(fetched),
                        "cache_hits": len(shard_names) - len(fetched)})
    return figures


def _read(cfg, src: str, index: dict, env: dict, device, step_for, warmup: int,
          work: Path, link: links.Link | None) -> list[list[dict]]:
    """Every repeat's epochs, each repeat cold; the steps go to `step_for(repeat)`."""
    shard_names = {n for n in index["files"] if n not in ("index.json", s3.INDEX)}
    repeats = []
    for r in range(cfg.repeats):
        step, epochs, ds = step_for(r), [], None
        cache = work / f"cache-{r}"
        try:
            for e in range(cfg.epochs):
                if ds is None or cfg.cache == "drop":
                    if ds is not None:
                        read.release(cfg.variant, ds)
                    shutil.rmtree(cache, ignore_errors=True)
                    cache.mkdir(parents=True)
                    ds = read.dataset(cfg.variant, src, index, cache, cfg.seed + r, env,
                                      cfg.batch_size)
                folder = work / f"r{r}e{e}"
                before = link.counts() if link is not None else None
                times = loops.run_epoch(loader(cfg, ds, index, folder, device, env), step,
                                        warmup)
                counted = links.delta(link.counts(), before) if link is not None else None
                if not times.samples:  # its workers found nothing to read, and said nothing
                    raise BenchlibError(f"{cfg.variant}: epoch {e + 1} of repeat {r + 1} read no "
                                       f"sample of {src}'s {index['samples']}")
                epochs.append(_epoch(times, warmup, shard_names, counted, folder))
        finally:  # a failed epoch's reader too: Mosaic's shared memory outlives the process
            if ds is not None:
                read.release(cfg.variant, ds)
        repeats.append(epochs)
    return repeats


def measure(cfg: Any, device: torch.device, step_for, warmup: int) -> list[list[dict]]:
    """The row's repeats (each a list of epochs' figures), read through a link started for
    the row where the shards are on a store; a store that stops answering fails the row
    naming it (the next row starts it again)."""
    with source(cfg) as (src, index, env):
        return _through_link(cfg, src, index, env, device, step_for, warmup)


def _through_link(cfg: Any, src: str, index: dict, env: dict, device: torch.device, step_for,
                  warmup: int) -> list[list[dict]]:
    work = Path(tempfile.mkdtemp(prefix="benchlib-shards-"))
    link = None
    try:
        if cfg.store == "s3":
            link = links.start(env["AWS_ENDPOINT_URL"], cfg.link_mibps, cfg.link_latency_ms)
            env = {**env, "AWS_ENDPOINT_URL": link.endpoint, "S3_ENDPOINT_URL": link.endpoint}
        with paths.environment(env):
            try:
                return _read(cfg, src, index, env, device, step_for, warmup, work, link)
            except Exception as e:
                upstream = link.upstream if link is not None else None
                if upstream and not server.answers(upstream):
                    raise StoreFailed(f"store: {upstream} stopped answering during the row "
                                      f"({src}): {type(e).__name__}; the next row starts "
                                      "the workbook's store again") from e
                raise
    finally:
        if link is not None:
            link.stop()
        shutil.rmtree(work, ignore_errors=True)


def timed(repeats: list[list[dict]]) -> tuple:
    """The repeats as the IO study's `_measure` gives its own: each repeat's totals, every
    timed step's data and compute seconds, each epoch's figures, the first epoch's steps,
    each epoch's first and last loss."""
    totals, all_data, all_compute, epochs, losses = [], [], [], [], []
    for r, rep in enumerate(repeats):
        data = [s for e in rep for s in e["timed"][0]]
        compute = [s for e in rep for s in e["timed"][1]]
        samples = sum(sum(e["timed"][2]) for e in rep)
        totals.append({"repeat": r, "samples_per_s": samples / (sum(data) + sum(compute)),
                       "total_s": sum(e["epoch_s"] for e in rep), "data_s": sum(data),
                       "compute_s": sum(compute)})
        all_data += data
        all_compute += compute
        epochs += [{k: e[k] for k in ("epoch_s", "first_batch_s", "warmup_s",
                                      "epoch_samples_per_s")} for e in rep]
        losses += [e["loss"] for e in rep]
    return totals, all_data, all_compute, epochs, repeats[0][0]["steps"], losses


def _summary(values: list, name: str) -> dict[str, Any]:
    return summarize([v for v in values if v is not None], name, independent=False)


def details(repeats: list[list[dict]]) -> dict[str, Any]:
    """What the record keeps beside its figures: every epoch's workers and stalls."""
    return {"pipeline_epochs": [[{k: e[k] for k in ("first_batch_s", "epoch_samples_per_s",
                                                    "wait_p50_s", "wait_p99_s", "stalls",
                                                    "stall_s", "stall_at", "workers",
                                                    "worker_start_s")}
                                 for e in rep] for rep in repeats]}


def figures(cfg: Any, repeats: list[list[dict]]) -> dict[str, Any]:
    """The row's figures: the cold first batch and worker start-up, epoch 1's and epoch 2's
    rates, the waits and stalls, what crossed the link, the slowest worker, the link."""
    first = [rep[0] for rep in repeats]
    second = [rep[1] for rep in repeats if len(rep) > 1]
    every = [e for rep in repeats for e in rep]
    out: dict[str, Any] = {
        **_summary([e["first_batch_s"] for e in first], "first_batch_cold_s"),
        **_summary([e["worker_start_s"] for e in first], "worker_start_s"),
        # the fastest worker's start beside the slowest's: one reader stalled, or the link
        "worker_start_min_s": statistics.median(
            min((w["start_s"] for w in e["workers"]), default=0.0) for e in first),
        **_summary([e["epoch_samples_per_s"] for e in first], "epoch1_samples_per_s"),
        "wait_p50_s": statistics.median(e["wait_p50_s"] for e in every),
        "wait_p99_s": statistics.median(e["wait_p99_s"] for e in every),
        "stall_s": statistics.median(e["stall_s"] for e in every),
        "stalls": statistics.median(e["stalls"] for e in every),
        "stall_share": statistics.median(e["stall_s"] / e["epoch_s"] for e in every),
        "epoch_data_share": statistics.median(e["data_s"] / e["step_s"] for e in every),
        "shard_format": cfg.variant, "store_kind": cfg.store, "link": link_text(cfg),
    }
    if second:
        out.update(_summary([e["epoch_samples_per_s"] for e in second], "epoch2_samples_per_s"))
    for n, group in (("1", first), ("2", second)):
        if group and "bytes_read" in group[0]:
            out[f"bytes_read_epoch{n}"] = statistics.median(e["bytes_read"] for e in group)
            out[f"requests_epoch{n}"] = statistics.median(e["requests"] for e in group)
            out[f"cache_hits_epoch{n}"] = statistics.median(e["cache_hits"] for e in group)
    by_worker: dict[int, list[dict]] = {}
    for e in every:
        for w in e["workers"]:
            by_worker.setdefault(w["worker"], []).append(w)
    medians = [{"worker": k, **{f: statistics.median(x[f] for x in ws if x[f] is not None)
                                for f in ("start_s", "item_s", "samples")
                                if any(x[f] is not None for x in ws)}}
               for k, ws in sorted(by_worker.items())]
    slow = timing.slow_workers(medians)
    out["workers_n"] = len(medians)
    # the slowest worker named (the record's details keep every worker's figures)
    out.update({"slow_worker": slow[0]["worker"], "slow_worker_what": slow[0]["what"],
                "slow_worker_s": slow[0]["seconds"], "slow_worker_others_s": slow[0]["others_s"]}
               if slow else {"slow_worker": None})
    return out


def link_text(cfg: Any) -> str:
    """"local files", or "s3, 20 MiB/s, 30 ms per request" (the row's link, in words)."""
    if cfg.store == "local":
        return "local files"
    cap = f"{cfg.link_mibps:g} MiB/s" if cfg.link_mibps else "no cap"
    where = cfg.store_endpoint or "the workbook's store on loopback"
    return f"s3 ({where}), {cap}, {cfg.link_latency_ms:g} ms per request"


def sentence(m: dict[str, Any]) -> str:
    """The row's pipeline in one line: first batch, each epoch, waits, stalls, the link's
    traffic and the slow workers."""
    two = m.get("epoch2_samples_per_s")
    text = (f"{m['shard_format']} shards, {m['link']}: first batch "
            f"{m['first_batch_cold_s']:.2f} s cold (slowest worker's start "
            f"{m['worker_start_s']:.2f} s), epoch 1 {m['epoch1_samples_per_s']:,.0f} samples/s"
            + (f", epoch 2 {two:,.0f}" if two is not None else "")
            + f"; batch wait p50 {m['wait_p50_s'] * 1e3:.1f} ms, p99 {m['wait_p99_s'] * 1e3:.1f} "
            f"ms; {m['stalls']:g} stalls, {m['stall_s']:.2f} s an epoch")
    if m.get("bytes_read_epoch1") is not None:
        text += (f"; epoch 1 read {m['bytes_read_epoch1'] / 2**20:.1f} MiB in "
                 f"{m['requests_epoch1']:g} requests")
    if m.get("slow_worker") is not None:
        text += (f"; worker {m['slow_worker']} is slow ({m['slow_worker_what'].replace('_s', '')} "
                 f"{m['slow_worker_s'] * 1e3:.1f} ms against {m['slow_worker_others_s'] * 1e3:.1f} "
                 "ms)")
    return text
