"""Shards as a training study's data set: `dataset: FORMAT:LOCATION`, where FORMAT is wds,
litdata or mds and LOCATION a folder of shards (`outputs/data/shards/mydataset/mds-1mb`)
or `s3://BUCKET/PREFIX`, written by `benchlib data --shards`. Each rank reads its share as
the library splits it (WebDataset's `split_by_node` and `split_by_worker`, LitData's and
Mosaic's own partitions from RANK and WORLD_SIZE), through DataLoader workers.

An `s3://` location is read from the endpoint in AWS_ENDPOINT_URL with the AWS keys, or,
where none is set, from the workbook's own store, which must be running
(`python -m benchlib store start`): its endpoint and keys go to the rank's environment,
and from there to its workers. The model check's batch takes its shape and labels from
the shards' index: no shard is read before the workers start.
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from torch.utils.data import IterableDataset

from benchlib import paths
from benchlib.errors import ConfigError
from benchlib.shards import read, write
from benchlib.store import s3, server


class RankShards(IterableDataset):
    """A library's reader of this rank's share, decoded to (input, label); its length is
    the rank's share of the samples (the steps an epoch takes, for the loop's windows).
    `worker_start`: how its DataLoader starts workers (None: the default, fork); `env`: the
    store's variables, set in each worker first (read.in_worker)."""

    def __init__(self, reader: Any, decode: read.Decode, samples: int,
                 worker_start: str | None = None, env: dict[str, str] | None = None):
        self.reader, self.decode, self.samples = reader, decode, samples
        self.worker_start, self.env = worker_start, env or {}

    def __len__(self) -> int:
        return math.ceil(self.samples / max(1, int(os.environ.get("WORLD_SIZE", "1"))))

    def __iter__(self):
        read.in_worker(self.env)
        return (self.decode(s) for s in self.reader)


def parse(name: str) -> tuple[str, str]:
    """`FORMAT:LOCATION` -> (format, a folder made absolute, or the s3:// URL)."""
    fmt, _, where = name.partition(":")
    return fmt, where if where.startswith("s3://") else str(paths.resolve(where))


def locate(name: str) -> tuple[str, str, dict, dict[str, str]]:
    """(format, location, its index, the store's variables), every shard checked whole;
    the store's variables put in this process's environment, for its workers."""
    fmt, where = parse(name)
    write.library(fmt)
    if not where.startswith("s3://"):
        folder = Path(where)
        if not folder.is_dir():
            raise ConfigError("dataset", f"{name!r}: no folder {folder}; `benchlib data "
                              f"--shards {fmt}` writes them under <path>/shards/")
        return fmt, where, write.read_index(folder), {}
    if os.environ.get("AWS_ENDPOINT_URL"):
        env = server.endpoint_env(os.environ["AWS_ENDPOINT_URL"],
                                  os.environ.get("AWS_ACCESS_KEY_ID", ""),
                                  os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
    else:
        store = server.status()
        if store is None:
            raise ConfigError("dataset", f"{name!r}: no store to read it from: set "
                              "AWS_ENDPOINT_URL and your keys, or start the workbook's "
                              "(python -m benchlib store start)")
        env = store.env()
    index = s3.check_shards(where, env)
    os.environ.update(env)
    return fmt, where, index, env


def dataset(name: str, seed: int, batch: int) -> tuple[RankShards, tuple]:
    """(this rank's reader, what the model check needs: a batch of 2 of the samples' shape,
    its labels and the largest label, from the shards' index). Nothing reads a shard before
    the DataLoader's workers: each library's reader sets up in them (the rule
    benchlib.trainers.probe keeps for a data set of the user's), and no check can join a
    library's own coordination across ranks (Mosaic's barrier) by mistake."""
    import torch

    fmt, where, index, env = locate(name)
    largest = int(index.get("largest_label", 9))
    found = (torch.rand(2, *index["shape"], generator=torch.Generator().manual_seed(seed)),
             torch.tensor([0, largest]), largest)
    cache = Path(tempfile.mkdtemp(prefix="benchlib-shards-")) if where.startswith("s3://") else None
    if cache is not None:  # this rank's downloads, gone with it (atexit: after the reader's release)
        atexit.register(shutil.rmtree, cache, True)
    reader = read.dataset(fmt, where, index, cache, seed, env, batch)
    if os.environ.get("LOCAL_RANK", "0") == "0":  # Mosaic's shared memory: its node's leader's
        atexit.register(read.release, fmt, reader)
    # Mosaic from a store: forked workers would share the S3 connection this rank opened
    # for index.json and read each other's answers (docs/studies.md, the named case)
    start = "forkserver" if fmt == "mds" and cache is not None else None
    return RankShards(reader, read.decoder(fmt, index), index["samples"], start, env), found
