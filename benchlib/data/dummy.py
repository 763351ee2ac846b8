"""Images without files: seed 001's `--dummy` data for the elastic trainer, cheap enough
that a run measures training and not the making of fake images."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset


class DummyImages(Dataset):
    """`--dummy`: `n` samples without files (seed 001's FakeData, without its cost per
    image): item i is image i % 64 of a pool made once from the seed, so the samples are
    the same on every rank and every attempt, and a whole batch is one indexing op
    (`__getitems__`; use `storage.passthrough` as the collate_fn)."""

    POOL = 64

    def __init__(self, n: int, shape: tuple[int, ...], num_classes: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.n, pool = n, min(n, self.POOL)
        self.images = torch.rand(pool, *shape, generator=g)
        self.labels = torch.randint(num_classes, (pool,), generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.images[i % len(self.labels)], self.labels[i % len(self.labels)]

    def __getitems__(self, indices: list[int]):
        index = torch.as_tensor(indices) % len(self.labels)
        return self.images[index], self.labels[index]
