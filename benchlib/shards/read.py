"""Shards read through each library's own reader, with DataLoader workers, shuffling and
per-worker splitting as each library intends:

- wds: `webdataset.WebDataset` over the tar files (local paths; from a store, presigned
  SigV4 URLs fetched by `pipe:curl`, WebDataset's way to read plain HTTP), shards shuffled
  per epoch and split across workers (`split_by_worker`), samples shuffled in a buffer;
  `cache_dir` keeps the fetched shards for the next epoch;
- litdata: `litdata.StreamingDataset` over the folder or `s3://` URL (its obstore or boto3
  downloads, chunks cached in `cache_dir`), shuffled, chunks split across workers by it;
- mds: Mosaic's `streaming.StreamingDataset` (`remote` the `s3://` URL, `local` the
  cache; a local folder is its own `local`), shuffled, partitioned across workers by it.

Every reader yields the IO study's sample: a float32 1x28x28 tensor and its int label.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _tensor(x: Any, shape: list[int]) -> torch.Tensor:
    if isinstance(x, (bytes, bytearray, memoryview)):
        return torch.from_numpy(np.frombuffer(x, dtype=np.float32).copy()).view(*shape)
    return torch.from_numpy(np.array(x, dtype=np.float32)).view(*shape)  # a copy: writable


class Decode:
    """A library's sample (a dict of its own keys) to (float32 tensor, int label); an
    image file's bytes (`encoding: image`) decoded, resized and centre-cropped to `shape`
    (benchlib.data.transforms' evaluation steps for ImageNet-layout folders)."""

    def __init__(self, fmt: str, shape: list[int], encoding: str = "float32"):
        self.fmt, self.shape, self.encoding = fmt, shape, encoding
        self.transform = None

    def _image(self, data: bytes) -> torch.Tensor:
        import io

        from PIL import Image

        if self.transform is None:
            from benchlib.data.transforms import imagefolder

            self.transform = imagefolder(self.shape[-1], augment=False)
        return self.transform(Image.open(io.BytesIO(data)).convert("RGB"))

    def __call__(self, sample: dict) -> tuple[torch.Tensor, int]:
        if self.fmt == "wds":
            x, y = sample.get("img", sample.get("x.f32")), sample["cls"]
        else:
            x, y = sample["x"], sample["y"]
        x = self._image(bytes(x)) if self.encoding == "image" else _tensor(x, self.shape)
        return x, int(y)


def decoder(fmt: str, index: dict) -> Decode:
    """The Decode of shards with this index."""
    return Decode(fmt, index["shape"], index.get("encoding", "float32"))


def _wds(source: str, index: dict, cache: Path | None, seed: int, env: dict) -> Any:
    import webdataset as wds

    names = sorted(n for n in index["files"] if n.endswith(".tar"))
    if source.startswith("s3://"):
        from benchlib.store.s3 import signed_urls

        urls = [f"pipe:curl -s -S -f '{u}'" for u in signed_urls(source, names, env)]
    else:
        urls = [str(Path(source) / n) for n in names]
    return wds.WebDataset(urls, shardshuffle=len(urls), seed=seed, empty_check=False,
                          nodesplitter=wds.split_by_node, workersplitter=wds.split_by_worker,
                          cache_dir=str(cache) if cache is not None and source.startswith("s3://")
                          else None).shuffle(1000)


def _litdata(source: str, index: dict, cache: Path | None, seed: int, env: dict) -> Any:
    import litdata

    options = None
    if source.startswith("s3://") and env.get("AWS_ENDPOINT_URL"):
        options = {"endpoint_url": env["AWS_ENDPOINT_URL"]}
        if env["AWS_ENDPOINT_URL"].startswith("http://"):
            # litdata hands obstore client options of its own, which drop obstore's
            # AWS_ALLOW_HTTP: a plain-http endpoint (a store on loopback) needs it here
            from litdata.streaming import downloader

            downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = "true"
    return litdata.StreamingDataset(source, shuffle=True, seed=seed, storage_options=options,
                                    cache_dir=str(cache) if cache is not None and
                                    source.startswith("s3://") else None)


def _mds(source: str, index: dict, cache: Path | None, seed: int, env: dict,
         batch_size: int) -> Any:
    from streaming import StreamingDataset

    if source.startswith("s3://"):
        return StreamingDataset(remote=source, local=str(cache), shuffle=True, shuffle_seed=seed,
                                batch_size=batch_size)
    return StreamingDataset(local=source, shuffle=True, shuffle_seed=seed, batch_size=batch_size)


def dataset(fmt: str, source: str, index: dict, cache: Path | None, seed: int, env: dict,
            batch_size: int) -> Any:
    """The library's IterableDataset over `source` (a folder, or s3://BUCKET/PREFIX read
    with the endpoint and keys in `env`, which the process has in os.environ too), its
    store copies kept in `cache`."""
    if fmt == "wds":
        return _wds(source, index, cache, seed, env)
    if fmt == "litdata":
        return _litdata(source, index, cache, seed, env)
    return _mds(source, index, cache, seed, env, batch_size)


def in_worker(env: dict[str, str]) -> None:
    """At the start of a DataLoader worker's share: the store's endpoint and keys in its
    environment. A worker a forkserver started has the server's, from whenever the server
    started (an earlier row's link, in a kernel that ran one); forked or spawned, it has
    them already."""
    from torch.utils.data import get_worker_info

    if env and get_worker_info() is not None:
        os.environ.update(env)


def release(fmt: str, ds: Any) -> None:
    """What a reader holds beyond its object: Mosaic's shared memory, named by a prefix of
    its own (a second reader of the same folder in this process is refused until it is
    freed, and segments left behind pile up in /dev/shm). Only this reader's segments are
    unlinked: Mosaic's own `clean_stale_shared_memory` unlinks every reader's on the
    machine, live ones too (a row beside a training run gave that run's workers fresh,
    empty shard states, and labels from another sample's bytes)."""
    if fmt != "mds":
        return
    import gc
    from multiprocessing import shared_memory

    from streaming.base.constant import BARRIER_FILELOCK, CACHE_FILELOCK, SHM_TO_CLEAN
    from streaming.base.shared.prefix import _get_path

    prefix = getattr(ds, "_shm_prefix_int", None)
    locks = getattr(ds, "_filelock_root", None)
    del ds
    gc.collect()
    if prefix is None:
        return
    for name in (BARRIER_FILELOCK, CACHE_FILELOCK):  # its file locks, left in the temp folder
        if locks:
            Path(locks, _get_path(prefix, name)).unlink(missing_ok=True)
    for name in SHM_TO_CLEAN:
        try:
            shm = shared_memory.SharedMemory(_get_path(prefix, name))
        except (FileNotFoundError, ValueError):
            continue
        shm.close()
        shm.unlink()
