"""`benchlib data --shards FORMATS --shard-mb N [--store s3] [--images FOLDER]`: the IO data
sets (and a folder of the user's images, as `images`) written as shards under
`<path>/shards/<dataset>/<format>-<N>mb/`, and with `--store s3` uploaded
to `s3://benchlib/<dataset>/<format>-<N>mb` at the workbook's own store (started if need
be) or `store_endpoint`. Where the shards and their upload are already there, whole and of
the same data, nothing is written again."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

from benchlib import paths
from benchlib.config.choices import IO_DATASETS
from benchlib.data.manifest import describe
from benchlib.data.storage import decoded
from benchlib.shards import write
from benchlib.store import s3, server


def local_folder(root: Path, dataset: str, fmt: str, shard_mb: float) -> Path:
    return root / "shards" / dataset / write.folder_name(fmt, shard_mb)


def default_url(dataset: str, fmt: str, shard_mb: float) -> str:
    return f"s3://{server.BUCKET}/{dataset}/{write.folder_name(fmt, shard_mb)}"


@contextlib.contextmanager
def store_env(endpoint: str) -> Iterator[dict[str, str]]:
    """The endpoint and keys a reader or uploader uses: the workbook's own store where
    `endpoint` is empty (started for the while if it is not running: server.session),
    else `endpoint` with the process's AWS keys."""
    if not endpoint:
        with server.session() as store:
            yield store.env()
        return
    yield server.endpoint_env(endpoint, os.environ.get("AWS_ACCESS_KEY_ID", ""),
                              os.environ.get("AWS_SECRET_ACCESS_KEY", ""))


def _current(folder: Path, sha: str) -> dict | None:
    try:
        index = write.read_index(folder)
    except Exception:  # noqa: BLE001 - missing or damaged: written again
        return None
    return index if index.get("data_sha256") == sha else None


def prepare(cfg: Any) -> list[dict[str, Any]]:
    """Every (data set, format) `cfg` asks for, written (or found) and uploaded where asked:
    one entry each with the folder, the URL, the shards, bytes and seconds."""
    if cfg.store != "s3":
        return _prepare(cfg, None)
    with store_env(cfg.store_endpoint) as env:
        return _prepare(cfg, env)


IMAGES = "images"  # the name a folder of the user's images has under shards/ and in the store
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}


def image_folder(folder: str) -> tuple[list[Path], list[int], str]:
    """A folder of the user's images, one subfolder per class (ImageFolder's layout): the
    files, their class indices (subfolders in sorted order), and a hash of what is there."""
    import hashlib

    from benchlib.errors import ConfigError

    root = paths.resolve(folder)
    classes = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    files, labels = [], []
    for label, sub in enumerate(classes):
        for f in sorted(sub.rglob("*")):
            if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES:
                files.append(f)
                labels.append(label)
    if not files:
        raise ConfigError("images", f"{root} holds no images in class subfolders (ImageFolder's "
                          f"layout: {root}/CLASS/*.jpg)")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.relative_to(root)} {f.stat().st_size}\n".encode())
    return files, labels, digest.hexdigest()


def _sources(cfg: Any, root: Path):
    """(name, its hash, a loader of (images, labels, what the index adds)) per data set."""
    for dataset in (d for d in cfg.datasets() if d in IO_DATASETS):
        def load(dataset=dataset):
            x, y = decoded(dataset, root)
            return x.numpy(), y.numpy(), {}
        yield dataset, describe(root, dataset)["sha256"], load
    if cfg.images:
        files, labels, sha = image_folder(cfg.images)

        def load_images():
            import numpy as np

            return ([f.read_bytes() for f in files], np.asarray(labels),
                    {"encoding": "image", "shape": [3, cfg.images_size, cfg.images_size],
                     "images": str(paths.resolve(cfg.images))})
        yield IMAGES, sha, load_images


def _prepare(cfg: Any, env: dict[str, str] | None) -> list[dict[str, Any]]:
    root = paths.resolve(cfg.path)
    done = []
    for dataset, sha, load in _sources(cfg, root):
        loaded = None
        for fmt in cfg.shard_formats():
            start = time.perf_counter()
            folder = local_folder(root, dataset, fmt, cfg.shard_mb)
            index = _current(folder, sha)
            if index is not None and index.get("shape") and dataset == IMAGES \
                    and index["shape"][-1] != cfg.images_size:
                index = None  # written for another side
            if index is None:
                loaded = loaded or load()
                images, labels, extra = loaded
                index = write.write(fmt, images, labels, folder, cfg.shard_mb,
                                    {"dataset": dataset, "data_sha256": sha, **extra})
            entry = {"dataset": dataset, "format": fmt, "folder": str(folder),
                     "shards": index["shards"], "samples": index["samples"],
                     "bytes": sum(index["files"].values()), "url": None}
            if env is not None:
                url = default_url(dataset, fmt, cfg.shard_mb)
                try:
                    there = s3.check_shards(url, env)
                except Exception:  # noqa: BLE001 - not there, or not whole: uploaded again
                    there = None
                if there is None or json.dumps(there, sort_keys=True) != \
                        json.dumps(index, sort_keys=True):
                    s3.upload(folder, url, env)
                entry["url"] = url
                entry["endpoint"] = env["AWS_ENDPOINT_URL"]
            entry["seconds"] = time.perf_counter() - start
            done.append(entry)
    return done
