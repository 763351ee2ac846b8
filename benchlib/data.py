"""Data sets: download where there is network, generate the same on-disk format where not.

Layout under one data folder (`--path`):
    FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte   what torchvision reads
    mydataset.npz                                                     seed 000's MyDataSet
    cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}      seed 002's CIFAR-10
    imagefolder/{train,val}/<class>/*.JPEG                            ImageNet's layout (seed 003)
    manifest.json     per data set: real or generated, samples, bytes, sha256, params

The offline FashionMNIST is written as the same raw IDX files torchvision extracts from
the download, so `torchvision.datasets.FashionMNIST(path, download=False)` loads it and
the per-item decode (PIL image, ToTensor) costs what it costs on the real data. Its
images are class prototypes plus noise, so a model can learn them.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import numpy as np

from benchlib import atomic, paths
from benchlib.config import DataPrepConfig
from benchlib.errors import BenchlibError, UsageError

MANIFEST = "manifest.json"
IMAGE_SIDE = 28
NUM_CLASSES = 10
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IDX_UBYTE_IMAGES = 0x00000803  # IDX magic: unsigned byte, 3 dimensions
IDX_UBYTE_LABELS = 0x00000801  # IDX magic: unsigned byte, 1 dimension


def _log(message: str) -> None:
    print(f"benchlib data: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- manifest


def read_manifest(path: str | Path) -> dict[str, Any]:
    file = paths.resolve(path) / MANIFEST
    if not file.exists():
        return {}
    return json.loads(file.read_text())


def _record_in_manifest(root: Path, name: str, entry: dict[str, Any]) -> None:
    manifest = read_manifest(root)
    manifest[name] = entry
    atomic.write_json(root / MANIFEST, manifest)


def describe(path: str | Path, dataset: str) -> dict[str, Any]:
    """The manifest entry of `dataset` under `path`; a clear error if it was never prepared."""
    root = paths.resolve(path)
    entry = read_manifest(root).get(dataset)
    if entry is None or not all((root / f).exists() for f in entry["files"]):
        raise UsageError(
            f"path: {root} has no {dataset} data; "
            f"run `python -m benchlib data --path {root} --offline` first"
        )
    return entry


def _sha256(root: Path, files: list[str]) -> str:
    digest = hashlib.sha256()
    for name in files:
        with open(root / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _entry(root: Path, source: str, files: list[str], samples: dict, params: dict, prep_s: float):
    return {
        "source": source,
        "samples": samples,
        "files": files,
        "bytes": sum((root / f).stat().st_size for f in files),
        "sha256": _sha256(root, files),
        "params": params,
        "prep_s": round(prep_s, 3),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _reused(root: Path, name: str, params: dict) -> dict[str, Any] | None:
    """The manifest entry of `name` if it can be reused as it is (see `_reusable`)."""
    old = read_manifest(root).get(name)
    if not _reusable(root, old, params):
        return None
    _log(f"{name}: reusing {old['source']} data in {root}")
    return old


def _reusable(root: Path, entry: dict[str, Any] | None, params: dict) -> bool:
    """An entry is reused when its files are all there with the recorded size, and it is
    real data or was generated with the same parameters."""
    if not entry or not all((root / f).exists() for f in entry["files"]):
        return False
    if sum((root / f).stat().st_size for f in entry["files"]) != entry["bytes"]:
        return False
    return entry["source"] == "real" or entry["params"] == params


# ---------------------------------------------------------------- FashionMNIST


def _class_prototypes(rng: np.random.Generator, side: int = IMAGE_SIDE,
                      channels: int = 0) -> np.ndarray:
    """Ten blocky side x side shapes in [0, 1] inside an ellipse, one per class; with
    `channels`, colour images shaped (10, channels, side, side)."""
    extra = (channels,) if channels else ()
    coarse = rng.random((NUM_CLASSES, *extra, side // 4, side // 4))
    shapes = np.kron(coarse, np.ones((4, 4)))
    yy, xx = np.mgrid[:side, :side]
    half = (side - 1) / 2
    ellipse = ((yy - half) / (side * 0.47)) ** 2 + ((xx - half) / (side * 0.36)) ** 2 <= 1
    return (shapes * ellipse).astype(np.float32)


def generate_images(n: int, rng: np.random.Generator, prototypes: np.ndarray):
    """`n` uint8 images shaped like the prototypes, balanced labels 0-9:
    prototype x brightness + noise."""
    shape = prototypes.shape[1:]
    labels = rng.permutation(np.arange(n) % NUM_CLASSES).astype(np.uint8)
    images = np.empty((n, *shape), dtype=np.uint8)
    for start in range(0, n, 10_000):  # chunks keep the float copy small
        chunk = labels[start : start + 10_000]
        brightness = rng.uniform(0.6, 1.0, size=(len(chunk),) + (1,) * len(shape))
        noise = rng.normal(0.0, 0.08, size=(len(chunk), *shape))
        pixels = np.clip(prototypes[chunk] * brightness.astype(np.float32)
                         + noise.astype(np.float32), 0.0, 1.0)
        images[start : start + len(chunk)] = np.round(pixels * 255).astype(np.uint8)
    return images, labels


def write_idx(file: Path, array: np.ndarray) -> None:
    """An uint8 array as an IDX file (big-endian header: magic, then each dimension)."""
    assert array.dtype == np.uint8 and array.ndim in (1, 3)
    magic = IDX_UBYTE_IMAGES if array.ndim == 3 else IDX_UBYTE_LABELS
    header = struct.pack(f">I{array.ndim}I", magic, *array.shape)
    atomic.write_bytes(file, header + array.tobytes())


def _fashion_files() -> list[str]:
    return [f"FashionMNIST/raw/{name}" for split in FASHION_FILES.values() for name in split]


def generate_fashion_mnist(root: Path, train_size: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    prototypes = _class_prototypes(rng)
    sizes = {"train": train_size, "test": max(train_size // 6, NUM_CLASSES)}
    for split, (images_name, labels_name) in FASHION_FILES.items():
        images, labels = generate_images(sizes[split], rng, prototypes)
        write_idx(root / "FashionMNIST" / "raw" / images_name, images)
        write_idx(root / "FashionMNIST" / "raw" / labels_name, labels)
    return sizes


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
    if (old := _reused(root, name, params)) is not None:
        return old
    start = time.perf_counter()
    source = "generated"
    if not cfg.offline:
        reason = network_reason(url())
        if reason is None:
            samples, source = download(), "real"
        else:
            _log(f"no network ({reason}); generating {name} offline in the same {fmt}")
    if source == "generated":
        samples = generate()
        _log(f"{name}: generated {samples['train']} + {samples['test']} images in {root}")
    entry = _entry(root, source, files, samples, params if source == "generated" else {},
                   time.perf_counter() - start)
    _record_in_manifest(root, name, entry)
    return entry


def prepare_fashion_mnist(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    from torchvision.datasets import FashionMNIST

    return _download_or_generate(
        root, cfg, "fashion-mnist", {"fashion_size": cfg.fashion_size, "seed": cfg.seed},
        url=lambda: FashionMNIST.mirrors[0], fmt="IDX format", files=_fashion_files(),
        download=lambda: download_fashion_mnist(root),
        generate=lambda: generate_fashion_mnist(root, cfg.fashion_size, cfg.seed))


# ---------------------------------------------------------------- MyDataSet


MYDATASET_FILE = "mydataset.npz"


def prepare_mydataset(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    """Seed 000's MyDataSet: `size` float32 28x28 samples uniform in [0, 1), labels 0-9."""
    params = {"size": cfg.size, "seed": cfg.seed}
    if (old := _reused(root, "mydataset", params)) is not None:
        return old
    start = time.perf_counter()
    rng = np.random.default_rng(cfg.seed + 1)
    data = rng.random((cfg.size, IMAGE_SIDE, IMAGE_SIDE), dtype=np.float32)
    labels = rng.integers(0, NUM_CLASSES, size=cfg.size, dtype=np.int64)
    with atomic.replacing(root / MYDATASET_FILE) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, data=data, labels=labels)
    _log(f"mydataset: generated {cfg.size} samples in {root}")
    entry = _entry(root, "generated", [MYDATASET_FILE], {"train": cfg.size}, params,
                   time.perf_counter() - start)
    _record_in_manifest(root, "mydataset", entry)
    return entry


def load_mydataset(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(data float32 [N, 28, 28], labels int64 [N])."""
    describe(path, "mydataset")
    with np.load(paths.resolve(path) / MYDATASET_FILE) as npz:
        return npz["data"], npz["labels"]


# ---------------------------------------------------------------- CIFAR-10


CIFAR_DIR = "cifar-10-batches-py"
CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck"]
CIFAR_TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]


def _pickle(file: Path, obj: Any) -> None:
    import pickle

    atomic.write_bytes(file, pickle.dumps(obj, protocol=2))


def generate_cifar10(root: Path, train_size: int, seed: int) -> dict[str, int]:
    """The python pickle batches torchvision reads: five training batches, one test batch
    and batches.meta; images are colour class shapes plus noise."""
    rng = np.random.default_rng(seed + 2)
    prototypes = _class_prototypes(rng, side=32, channels=3)
    sizes = {"train": train_size, "test": max(train_size // 5, NUM_CLASSES)}
    folder = root / CIFAR_DIR
    images, labels = generate_images(sizes["train"], rng, prototypes)
    for name, part in zip(CIFAR_TRAIN_BATCHES, np.array_split(np.arange(train_size), 5)):
        _pickle(folder / name, {"batch_label": name, "labels": labels[part].tolist(),
                                "data": images[part].reshape(len(part), -1),
                                "filenames": [f"generated_{i}.png" for i in part]})
    images, labels = generate_images(sizes["test"], rng, prototypes)
    _pickle(folder / "test_batch", {"batch_label": "test_batch", "labels": labels.tolist(),
                                    "data": images.reshape(len(labels), -1),
                                    "filenames": [f"generated_{i}.png" for i in range(len(labels))]})
    _pickle(folder / "batches.meta", {"label_names": CIFAR_CLASSES,
                                      "num_cases_per_batch": len(labels), "num_vis": 3072})
    return sizes


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


def cifar10(path: str | Path, train: bool = True, transform: Any = None):
    """torchvision's CIFAR10 over the prepared folder. Generated batches cannot match
    torchvision's published MD5 sums, so for them only that check is skipped."""
    from torchvision.datasets import CIFAR10

    class GeneratedCIFAR10(CIFAR10):
        def _check_integrity(self) -> bool:
            return all((Path(self.root) / self.base_folder / name).exists()
                       for name, _ in self.train_list + self.test_list)

        def _load_meta(self) -> None:
            import pickle

            with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as f:
                self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    root = paths.resolve(path)
    kind = CIFAR10 if describe(root, "cifar10")["source"] == "real" else GeneratedCIFAR10
    return kind(str(root), train=train, transform=transform, download=False)


# ---------------------------------------------------------------- ImageNet-layout JPEGs


IMAGEFOLDER_DIR = "imagefolder"
IMAGEFOLDER_SIDE = 160


def generate_imagefolder(root: Path, size: int, seed: int) -> tuple[dict[str, int], list[str]]:
    """`size` training and size/10 validation JPEGs in ImageNet's layout
    (train/<class>/*.JPEG, val/<class>/*.JPEG), 10 classes of colour shapes plus noise."""
    from PIL import Image

    rng = np.random.default_rng(seed + 3)
    prototypes = _class_prototypes(rng, side=IMAGEFOLDER_SIDE, channels=3)
    sizes, files = {"train": size, "test": max(size // 10, NUM_CLASSES)}, []
    for split, n in (("train", sizes["train"]), ("val", sizes["test"])):
        images, labels = generate_images(n, rng, prototypes)
        for i, (image, label) in enumerate(zip(images, labels)):
            name = f"{IMAGEFOLDER_DIR}/{split}/n{label:08d}/{split}_{i:07d}.JPEG"
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            with atomic.replacing(root / name, suffix=".JPEG") as tmp:
                Image.fromarray(image.transpose(1, 2, 0)).save(tmp, format="JPEG", quality=90)
            files.append(name)
    return sizes, files


def prepare_imagefolder(root: Path, cfg: DataPrepConfig) -> dict[str, Any]:
    """ImageNet cannot be downloaded without an account: point `path` at your copy, laid
    out as ImageFolder expects; this writes a generated one of the same layout."""
    params = {"imagefolder_size": cfg.imagefolder_size, "seed": cfg.seed}
    if (old := _reused(root, "imagefolder", params)) is not None:
        return old
    start = time.perf_counter()
    samples, files = generate_imagefolder(root, cfg.imagefolder_size, cfg.seed)
    _log(f"imagefolder: generated {samples['train']} + {samples['test']} JPEGs in {root} "
         "(ImageNet itself needs an account: use your own copy for real figures)")
    entry = _entry(root, "generated", files, samples, params, time.perf_counter() - start)
    _record_in_manifest(root, "imagefolder", entry)
    return entry


def imagefolder(path: str | Path, split: str = "train", transform: Any = None):
    from torchvision.datasets import ImageFolder

    root = paths.resolve(path)
    describe(root, "imagefolder")
    return ImageFolder(str(root / IMAGEFOLDER_DIR / split), transform=transform)


# ---------------------------------------------------------------- entry points


PREPARERS = {"fashion-mnist": prepare_fashion_mnist, "mydataset": prepare_mydataset,
             "cifar10": prepare_cifar10, "imagefolder": prepare_imagefolder}


def prepare(cfg: DataPrepConfig) -> dict[str, dict[str, Any]]:
    """Prepare the data sets `cfg` names under `cfg.path`; returns their manifest entries."""
    root = paths.resolve(cfg.path)
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
        raise BenchlibError(f"no data sets under {root}: run `python -m benchlib data --path {root}`")
    return rows


def prep_metrics(manifest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A data-prep run's metrics: per data set its source, samples and bytes; total time."""
    metrics: dict[str, Any] = {"prep_s": sum(e["prep_s"] for e in manifest.values())}
    for name, entry in manifest.items():
        key = name.replace("-", "_")
        metrics[f"{key}_source"] = entry["source"]
        metrics[f"{key}_samples"] = sum(entry["samples"].values())
        metrics[f"{key}_bytes"] = entry["bytes"]
    return metrics


def sample_images(path: str | Path, per_class: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A few FashionMNIST training images of each class, for a look at the data."""
    from torchvision.datasets import FashionMNIST

    describe(path, "fashion-mnist")
    ds = FashionMNIST(str(paths.resolve(path)), train=True, download=False)
    labels = ds.targets.numpy()
    picks = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(NUM_CLASSES)])
    return ds.data.numpy()[picks], labels[picks]
