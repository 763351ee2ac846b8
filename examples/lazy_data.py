"""A data set that sets itself up on first access, in each process that reads it: the
usual pattern for an h5py file, an LMDB environment or an S3 client, which must not be
opened before the DataLoader's workers fork (a handle shared across a fork breaks).
Here the "handle" is a pause of `BENCHLIB_EXAMPLE_SETUP_S` seconds (default 1) and a
line `<pid> <worker id or main>` appended to the file `BENCHLIB_EXAMPLE_HANDLES` names
(if set), so a test can see in which processes it was opened and what it cost.

    dataset: examples.lazy_data:lazy
"""

from __future__ import annotations

import os
import time

import torch
from torch.utils.data import Dataset, get_worker_info


class LazyImages(Dataset):
    """`size` 1x28x28 images, label `index % 10`; set up on the first item a process reads."""

    def __init__(self, size: int = 256):
        self.size = size
        self.handle: int | None = None  # the pid that opened it

    def __len__(self) -> int:
        return self.size

    def _open(self) -> None:
        time.sleep(float(os.environ.get("BENCHLIB_EXAMPLE_SETUP_S", "1")))
        log = os.environ.get("BENCHLIB_EXAMPLE_HANDLES")
        if log:
            info = get_worker_info()
            with open(log, "a") as f:
                f.write(f"{os.getpid()} {info.id if info is not None else 'main'}\n")
        self.handle = os.getpid()

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self.handle is None:  # opened once per process: never before the workers fork
            self._open()
        g = torch.Generator().manual_seed(index)
        return torch.rand(1, 28, 28, generator=g), index % 10


def lazy(size: int = 256) -> Dataset:
    return LazyImages(size)
