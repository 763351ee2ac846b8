"""Data sets: download where there is network, generate the same on-disk format where not.

Layout under one data folder (`--path`):
    FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte   what torchvision reads
    mydataset.npz                                                     seed 000's MyDataSet
    cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}      seed 002's CIFAR-10
    imagefolder/{train,val}/<class>/*.JPEG                            ImageNet's layout (seed 003)
    tokenfile/{train,val}.bin, meta.json                              nanoGPT's uint16 token ids
    manifest.json     per data set: real or generated, samples, bytes, sha256, params

The offline FashionMNIST is written as the same raw IDX files torchvision extracts from
the download, so `torchvision.datasets.FashionMNIST(path, download=False)` loads it and
the per-item decode (PIL image, ToTensor) costs what it costs on the real data. Its
images are class prototypes plus noise, so a model can learn them.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from benchlib import atomic, paths
from benchlib.config import DataPrepConfig
from benchlib.data import tokenfile
from benchlib.data.datasets import MYDATASET_FILE, cifar10, imagefolder, load_mydataset
from benchlib.data.generate import (
    CIFAR_DIR,
    CIFAR_TRAIN_BATCHES,
    IMAGE_SIDE,
    NUM_CLASSES,
    fashion_files,
    generate_cifar10,
    generate_fashion_mnist,
    generate_imagefolder,
)
from benchlib.data.manifest import (
    check_folder,
    describe,
    entry,
    log,
    prepare_hint,
    read_manifest,
    record_in_manifest,
    reused,
)
from benchlib.errors import BenchlibError, UsageError


def network_reason(url: str, timeout_s: float = 3.0) -> str | None:
    """None when `url`'s host answers on its port, else why not (one line)."""
    parts = urlparse(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
        return None
    except OSError as e:
        return f"{parts.hostname}:{port} unreachable ({e.__class__.__name__}: {e})"


def download_fashion_mnist(root: Path) -> dict[str, int]:
    """The real data set, through torchvision's own download code."""
    from torchvision.datasets import FashionMNIST

    train = FashionMNIST(str(root), train=True, download=True)
    test = FashionMNIST(str(root), train=False, download=True)
    return {"train": len(train), "test": len(test)}


def _download_or_generate(root: Path, cfg: DataPrepConfig, name: str, params: dict,
                          url: Callable[[], str], fmt: str, files: list[str],
                          download: Callable[[], dict], generate: Callable[[], dict]) -> dict:
    """Reuse what is there; else download where the network answers, else generate the
    same on-disk format (with a message saying why); record it in the manifest."""
    if (old := reused(root, name, params)) is not None:
        return old
    start = time.perf_counter()
    source = "generated"
    if not cfg.offline:
        reason = network_reason(url())
        if reason is None:
            samples, source = download(), "real"
        else:
            log(f"no network ({reason}); generating {name} offline in the same {fmt}")
    if source == "generated":
        samples = generate()
        log(f"{name}: generated {samples['train']} + {samples['test']} images in {root}")
    made = entry(root, source, files, samples, params if source == "generated" else {},
                   time.perf_counter() - start)
    record_in_manifest(root, name, made)
    return made


def prepare_fashion_mnist(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    from torchvision.datasets import FashionMNIST

    return _download_or_generate(
        root, cfg, "fashion-mnist", {"fashion_size": cfg.fashion_size, "seed": cfg.seed},
        url=lambda: FashionMNIST.mirrors[0], fmt="IDX format", files=fashion_files(),
        download=lambda: download_fashion_mnist(root),
        generate=lambda: generate_fashion_mnist(root, cfg.fashion_size, cfg.seed))


def prepare_mydataset(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    """Seed 000's MyDataSet: `size` float32 28x28 samples uniform in [0, 1), labels 0-9."""
    params = {"size": cfg.size, "seed": cfg.seed}
    if (old := reused(root, "mydataset", params)) is not None:
        return old
    start = time.perf_counter()
    rng = np.random.default_rng(cfg.seed + 1)
    data = rng.random((cfg.size, IMAGE_SIDE, IMAGE_SIDE), dtype=np.float32)
    labels = rng.integers(0, NUM_CLASSES, size=cfg.size, dtype=np.int64)
    with atomic.replacing(root / MYDATASET_FILE) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, data=data, labels=labels)
    log(f"mydataset: generated {cfg.size} samples in {root}")
    made = entry(root, "generated", [MYDATASET_FILE], {"train": cfg.size}, params,
                   time.perf_counter() - start)
    record_in_manifest(root, "mydataset", made)
    return made


def prepare_cifar10(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    from torchvision.datasets import CIFAR10

    def download() -> dict[str, int]:
        CIFAR10(str(root), train=True, download=True)
        return {"train": 50000, "test": 10000}

    files = [f"{CIFAR_DIR}/{n}" for n in [*CIFAR_TRAIN_BATCHES, "test_batch", "batches.meta"]]
    return _download_or_generate(
        root, cfg, "cifar10", {"cifar_size": cfg.cifar_size, "seed": cfg.seed},
        url=lambda: CIFAR10.url, fmt="pickle batches", files=files, download=download,
        generate=lambda: generate_cifar10(root, cfg.cifar_size, cfg.seed))


def prepare_imagefolder(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    """ImageNet cannot be downloaded without an account: point `path` at your copy, laid
    out as ImageFolder expects; this writes a generated one of the same layout."""
    params = {"imagefolder_size": cfg.imagefolder_size, "seed": cfg.seed}
    if (old := reused(root, "imagefolder", params)) is not None:
        return old
    start = time.perf_counter()
    samples, files = generate_imagefolder(root, cfg.imagefolder_size, cfg.seed)
    log(f"imagefolder: generated {samples['train']} + {samples['test']} JPEGs in {root} "
         "(ImageNet itself needs an account: use your own copy for real figures)")
    made = entry(root, "generated", files, samples, params, time.perf_counter() - start)
    record_in_manifest(root, "imagefolder", made)
    return made


def prepare_tokenfile(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    """nanoGPT's train.bin and val.bin of uint16 token ids, always generated: real text is
    not needed to measure speed (benchlib.data.tokenfile). Its samples are tokens."""
    params = {"tokenfile_size": cfg.tokenfile_size, "tokenfile_vocab": cfg.tokenfile_vocab,
              "seed": cfg.seed}
    if (old := reused(root, "tokenfile", params)) is not None:
        return old
    start = time.perf_counter()
    samples = tokenfile.generate(root, cfg.tokenfile_size, cfg.tokenfile_vocab, cfg.seed)
    log(f"tokenfile: generated {samples['train']:,} + {samples['val']:,} token ids below "
        f"{cfg.tokenfile_vocab:,} in {root / tokenfile.TOKENFILE_DIR}")
    made = entry(root, "generated", tokenfile.files(), samples, params,
                 time.perf_counter() - start)
    record_in_manifest(root, "tokenfile", made)
    return made


PREPARERS = {"fashion-mnist": prepare_fashion_mnist, "mydataset": prepare_mydataset,
             "cifar10": prepare_cifar10, "imagefolder": prepare_imagefolder,
             "tokenfile": prepare_tokenfile}


def prepare(cfg: DataPrepConfig) -> dict[str, dict[str, Any]]:
    """Prepare the data sets `cfg` names under `cfg.path`; returns their manifest entries."""
    root = check_folder(paths.resolve(cfg.path))
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"path: cannot create {root} ({e.strerror})") from e
    return {name: PREPARERS[name](root, cfg) for name in cfg.datasets()}


def _arrays(root: Path, name: str) -> tuple[int, tuple, str, np.ndarray]:
    """(samples, shape of one, dtype, labels) of a prepared data set, opened as the
    studies open it."""
    if name == "fashion-mnist":
        from torchvision.datasets import FashionMNIST

        ds = FashionMNIST(str(root), train=True, download=False)
        return len(ds), tuple(ds.data.shape[1:]), str(ds.data.numpy().dtype), ds.targets.numpy()
    if name == "mydataset":
        data, labels = load_mydataset(root)
        return len(data), data.shape[1:], str(data.dtype), labels
    if name == "cifar10":
        ds = cifar10(root, train=True)
        return len(ds), ds.data.shape[1:], str(ds.data.dtype), np.asarray(ds.targets)
    if name == "tokenfile":  # a sample is one token id; its classes, the distinct ids
        ids = np.memmap(root / tokenfile.TOKENFILE_DIR / "train.bin", dtype=tokenfile.DTYPE,
                        mode="r")
        return len(ids), (), str(ids.dtype), ids
    ds = imagefolder(root)
    first = np.asarray(ds[0][0])
    return len(ds), first.shape, str(first.dtype), np.asarray(ds.targets)


def verify(path: str | Path) -> list[dict[str, Any]]:
    """Load every prepared data set the way the studies do; report shape, dtype, labels."""
    root = paths.resolve(path)
    rows = []
    for name in read_manifest(root):
        start = time.perf_counter()
        samples, shape, dtype, labels = _arrays(root, name)
        rows.append({"dataset": name, "samples": samples, "shape": "x".join(map(str, shape)),
                     "dtype": dtype, "classes": int(len(np.unique(labels))),
                     "open_s": round(time.perf_counter() - start, 4)})
    if not rows:
        raise BenchlibError(f"no data sets under {root}: {prepare_hint(root)}")
    return rows


def sample_images(path: str | Path, per_class: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A few FashionMNIST training images of each class, for a look at the data."""
    from torchvision.datasets import FashionMNIST

    describe(path, "fashion-mnist")
    ds = FashionMNIST(str(paths.resolve(path)), train=True, download=False)
    labels = ds.targets.numpy()
    picks = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(NUM_CLASSES)])
    return ds.data.numpy()[picks], labels[picks]
