"""The prepared data sets opened as the studies read them: MyDataSet's arrays,
torchvision's CIFAR10 and ImageFolder over a prepared folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchlib import paths
from benchlib.data.generate import IMAGEFOLDER_DIR
from benchlib.data.manifest import describe

MYDATASET_FILE = "mydataset.npz"


def load_mydataset(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(data float32 [N, 28, 28], labels int64 [N])."""
    describe(path, "mydataset")
    with np.load(paths.resolve(path) / MYDATASET_FILE) as npz:
        return npz["data"], npz["labels"]


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


def imagefolder(path: str | Path, split: str = "train", transform: Any = None):
    from torchvision.datasets import ImageFolder

    root = paths.resolve(path)
    describe(root, "imagefolder")
    return ImageFolder(str(root / IMAGEFOLDER_DIR / split), transform=transform)
