"""A data set's decoded samples written as shards of about `shard_mb` MB in one of three
formats, each by its library's own writer:

| format  | library           | files                             | writer            |
|---------|-------------------|-----------------------------------|-------------------|
| wds     | webdataset        | `shard-000000.tar` ...            | `wds.ShardWriter` |
| litdata | litdata           | `chunk-0-0.bin` ..., `index.json` | `BinaryWriter`    |
| mds     | mosaicml-streaming| `shard.00000.mds` ..., `index.json` | `MDSWriter`     |

Each sample is the IO study's: float32 1x28x28 in [0, 1] and an int64 label, the same for
the same index as every other storage variant; or, for a folder of the user's images, the
image file's bytes as they are and its class (`encoding: image`, decoded by the readers).
Beside the shards, `shards.json` says what was written (format, shard size, samples, every
file with its bytes): the readers check a store's copy against it, so a truncated shard is
named before a row starts. The folder is written under a temporary name and renamed, so a
half-written one is never read.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from benchlib.errors import ConfigError, UsageError
from benchlib.shards import FORMATS
from benchlib.store.s3 import INDEX

MB = 1_000_000


def folder_name(fmt: str, shard_mb: float) -> str:
    """`wds-4mb`, `mds-0.5mb`: a format at a shard size, as a folder and a store prefix."""
    return f"{fmt}-{shard_mb:g}mb"


def check_size(shard_mb: float, field: str = "shard_mb") -> None:
    if not shard_mb > 0:
        raise ConfigError(field, f"must be > 0 MB (a shard holds at least one sample), got "
                          f"{shard_mb:g}")


def _wds(out: Path, images, labels: np.ndarray, limit: int) -> None:
    import webdataset as wds

    key = "img" if isinstance(images, list) else "x.f32"
    with wds.ShardWriter(str(out / "shard-%06d.tar"), maxsize=limit, verbose=0) as sink:
        for i in range(len(labels)):
            x = images[i] if key == "img" else images[i].tobytes()
            sink.write({"__key__": f"{i:09d}", key: x, "cls": str(int(labels[i])).encode()})


def _litdata(out: Path, images, labels: np.ndarray, limit: int) -> None:
    from litdata.streaming.writer import BinaryWriter

    writer = BinaryWriter(str(out), chunk_bytes=limit)
    for i in range(len(labels)):
        writer[i] = {"x": images[i], "y": int(labels[i])}
    writer.done()
    writer.merge()


def _mds(out: Path, images, labels: np.ndarray, limit: int) -> None:
    from streaming import MDSWriter

    out.rmdir()  # MDSWriter wants to make its folder itself
    x = "bytes" if isinstance(images, list) else \
        "ndarray:float32:" + ",".join(str(n) for n in images.shape[1:])
    with MDSWriter(out=str(out), columns={"x": x, "y": "int64"}, size_limit=limit,
                   progress_bar=False) as writer:
        for i in range(len(labels)):
            writer.write({"x": images[i], "y": int(labels[i])})


WRITERS = {"wds": _wds, "litdata": _litdata, "mds": _mds}
LIBRARIES = {"wds": "webdataset", "litdata": "litdata", "mds": "streaming"}


def library(fmt: str) -> None:
    """The format's library imports here, or one line saying which extra installs it."""
    import importlib

    try:
        importlib.import_module(LIBRARIES[fmt])
    except ImportError:
        raise UsageError(f"variant: {fmt} needs the {LIBRARIES[fmt]} package: pip install "
                         "'benchlib[streaming]' (docs/studies.md, the input pipeline)") from None


def write(fmt: str, images, labels: np.ndarray, folder: Path, shard_mb: float,
          described: dict | None = None) -> dict:
    """`images` (float32 [N, 1, 28, 28], or a list of image files' bytes, whose `described`
    gives their `shape` and `encoding: image`) and `labels` as shards of `fmt` in `folder`
    (replaced whole); its index, also written as `folder/shards.json`."""
    if fmt not in FORMATS:
        raise ConfigError("shards", f"{fmt!r} is not one of {', '.join(FORMATS)}")
    check_size(shard_mb)
    library(fmt)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        encoded = isinstance(images, list)
        WRITERS[fmt](tmp, images if encoded else np.ascontiguousarray(images, dtype=np.float32),
                     np.asarray(labels, dtype=np.int64), max(int(shard_mb * MB), 1))
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
        index = {"format": fmt, "shard_mb": shard_mb, "samples": int(len(labels)),
                 "encoding": "float32", "shape": None if encoded else list(images.shape[1:]),
                 "largest_label": int(np.max(labels)), "shards": sum(1 for n in files
                                                                  if n != "index.json"),
                 "files": files, **(described or {})}
        (tmp / INDEX).write_text(json.dumps(index, indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return index


def read_index(folder: Path) -> dict:
    """A local folder's index, its shards checked against it (missing, truncated)."""
    try:
        index = json.loads((folder / INDEX).read_text())
    except OSError:
        raise ConfigError("path", f"{folder} has no {INDEX}: write the shards with `benchlib "
                          "data --shards FORMAT`") from None
    from benchlib.store.s3 import check_sizes

    check_sizes(index, {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()},
                str(folder))
    return index
