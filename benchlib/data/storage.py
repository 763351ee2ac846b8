"""Storage variants of seed 000's test_funcs: the same samples, held and fetched differently.

| variant            | held as                                   | fetched                          |
|--------------------|-------------------------------------------|----------------------------------|
| raw                | the data set's own files                  | per item, decoded by its transform |
| preload            | decoded float tensors in RAM              | per item, then default collate   |
| preload_batched    | decoded float tensors in RAM              | a whole batch by tensor indexing |
| tensorclass        | a tensordict tensorclass in RAM           | a whole batch (`__getitems__`)   |
| tensorclass_memmap | the tensorclass memory-mapped on disk     | a whole batch                    |
| np_memmap          | a numpy .npy memory map of decoded floats | per item                         |

With no workers, the IO study and calibrate iterate preload_batched without a DataLoader
(loops.BatchLoader: the same batches in the same order, without its per-batch machinery).
Every variant yields, for the same index, the same float32 1x28x28 sample in [0, 1] and
the same int64 label (a test checks it). Decoded copies are cached under
`<data path>/cache/<dataset>-<checksum>/`, so they follow the data when it changes; the
time to build them is reported as `prepare_s`, outside the timed epochs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch.utils.data import Dataset, TensorDataset, default_collate

from benchlib import paths
from benchlib.config.choices import IN_MEMORY_VARIANTS, IO_DATASETS
from benchlib.data.datasets import load_mydataset
from benchlib.data.generate import FASHION_FILES, read_idx
from benchlib.data.manifest import describe
from benchlib.errors import UsageError

BATCHED = {"preload_batched", "tensorclass", "tensorclass_memmap"}


class MyDataSet(Dataset):
    """Seed 000's MyDataSet read per item: numpy float32 28x28 -> tensor 1x28x28."""

    def __init__(self, images: np.ndarray, labels: np.ndarray):
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return torch.from_numpy(self.images[i]).unsqueeze(0), int(self.labels[i])


class BatchedTensors(Dataset):
    """Decoded tensors fetched a batch at a time: `loops.make_loader` hands `__getitem__`
    the batch's indices as one tensor (and a plain DataLoader hands `__getitems__` a
    list), and one indexing op replaces `batch_size` item calls plus a stack."""

    fetches_batches = True

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int | torch.Tensor):
        if isinstance(i, torch.Tensor) and i.dim() == 1:
            return self._gather(i)
        return self.images[i], self.labels[i]

    def __getitems__(self, indices: list[int]):
        return self._gather(torch.as_tensor(indices))

    def _gather(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # index_select, not images[index]: advanced indexing took 2-2.5x as long for the same
        # rows (`python -m benchlib calibrate --path DATA`, this 2-core machine)
        return self.images.index_select(0, index), self.labels.index_select(0, index)


class NpMemmap(Dataset):
    """Decoded floats in a numpy memory map, read per item (as seed 000 did)."""

    def __init__(self, file: Path, labels: torch.Tensor):
        self.file, self.labels = file, labels
        self.images = np.load(file, mmap_mode="r")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return torch.from_numpy(np.array(self.images[i])), self.labels[i]


def passthrough(batch):
    """Collate for variants whose dataset already returns (images, labels) batches."""
    return batch


def tensorclass_collate(batch):
    return batch.images, batch.targets


@dataclass
class Prepared:
    """A variant ready for a DataLoader."""

    dataset: Any
    collate_fn: Callable
    variant: str
    samples: int
    source: str  # real or generated, from the data manifest
    prepare_s: float  # decoding and caching, outside the timed epochs

    def sample(self, i: int) -> tuple[torch.Tensor, int]:
        """Item `i` as (1x28x28 float tensor, int label), however the variant stores it."""
        if self.variant in BATCHED:
            x, y = self.collate_fn(self.dataset.__getitems__([i]))
            return x[0], int(y[0])
        x, y = self.dataset[i]
        return x, int(y)


def _raw(dataset: str, root: Path) -> Dataset:
    if dataset == "fashion-mnist":
        from torchvision.datasets import FashionMNIST
        from torchvision.transforms import ToTensor

        return FashionMNIST(str(root), train=True, download=False, transform=ToTensor())
    images, labels = load_mydataset(root)
    return MyDataSet(images, labels)


def decoded(dataset: str, root: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """All training samples decoded once: float32 [N, 1, 28, 28] in [0, 1], int64 [N].
    For FashionMNIST this is ToTensor's arithmetic on the whole array at once."""
    if dataset == "fashion-mnist":
        raw = root / "FashionMNIST" / "raw"
        images = torch.from_numpy(read_idx(raw / FASHION_FILES["train"][0]))
        labels = torch.from_numpy(read_idx(raw / FASHION_FILES["train"][1]))
        return images.unsqueeze(1).to(torch.float32).div(255), labels.to(torch.int64)
    images, labels = load_mydataset(root)
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels)


def _tensorclass_type():
    try:
        from tensordict import tensorclass
    except ImportError as e:
        raise UsageError("variant: tensorclass variants need the tensordict package "
                         "(pip install tensordict)") from e

    @tensorclass
    class ImageBatch:
        images: torch.Tensor
        targets: torch.Tensor

    return ImageBatch


def _memmap_atomically(tc, prefix: Path) -> None:
    """tensordict writes meta.json before the tensors: write into a temporary folder and
    rename it, so an interrupted write never looks like a finished cache."""
    import os
    import shutil
    import tempfile

    prefix.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=prefix.parent, prefix=f".{prefix.name}."))
    try:
        tc.memmap_(prefix=tmp / "data")
        os.rename(tmp / "data", prefix)
    except OSError:
        if not prefix.exists():  # lost a race with another process: theirs is complete
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cache_dir(dataset: str, root: Path) -> Path:
    return root / "cache" / f"{dataset}-{describe(root, dataset)['sha256'][:12]}"


def prepare(dataset: str, variant: str, path: str | Path) -> Prepared:
    """Build `variant` of `dataset` under `path` (prepared by `benchlib data`)."""
    if dataset not in IO_DATASETS:
        raise UsageError(f"dataset: {dataset!r} is not one of {', '.join(IO_DATASETS)}")
    if variant not in IN_MEMORY_VARIANTS:  # shards are read by their library (benchlib.shards)
        raise UsageError(f"variant: {variant!r} is not one of {', '.join(IN_MEMORY_VARIANTS)}")
    root = paths.resolve(path)
    source = describe(root, dataset)["source"]
    start = time.perf_counter()
    if variant == "raw":
        ds, collate = _raw(dataset, root), default_collate
    else:
        images, labels = decoded(dataset, root)
        if variant == "preload":
            ds, collate = TensorDataset(images, labels), default_collate
        elif variant == "preload_batched":
            ds, collate = BatchedTensors(images, labels), passthrough
        elif variant == "np_memmap":
            file = cache_dir(dataset, root) / "images.npy"
            if not file.exists():
                from benchlib import atomic

                with atomic.replacing(file, suffix=".npy") as tmp:
                    np.save(tmp, images.numpy())
            ds, collate = NpMemmap(file, labels), default_collate
        else:
            batch_type = _tensorclass_type()
            tc = batch_type(images=images, targets=labels, batch_size=[len(labels)])
            if variant == "tensorclass_memmap":
                prefix = cache_dir(dataset, root) / "tensorclass"
                if not prefix.exists():
                    _memmap_atomically(tc, prefix)
                tc = batch_type.load_memmap(prefix)
            ds, collate = tc, tensorclass_collate
    return Prepared(ds, collate, variant, len(ds), source, time.perf_counter() - start)
