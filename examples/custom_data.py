"""A data set of your own, as benchlib takes one: a function that returns a map-style
torch Dataset whose items are (input, label). It is built on every rank; a
DistributedSampler gives each rank its share. Here: images of four shapes drawn from a
seed, so every rank and every run sees the same data without any file.

    dataset: examples.custom_data:shapes     (a parameter table, or --dataset)
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

SHAPES = ("square", "disc", "bar", "cross")


class Shapes(Dataset):
    """`size` 3 x side x side images, each one shape at a random place, label its index."""

    def __init__(self, size: int = 512, side: int = 32, seed: int = 0):
        self.size, self.side, self.seed = size, side, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        label = index % len(SHAPES)
        n, r = self.side, self.side // 6
        cy, cx = (torch.randint(r, n - r, (2,), generator=g)).tolist()
        yy, xx = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
        dy, dx = (yy - cy).abs(), (xx - cx).abs()
        mask = [(dy <= r) & (dx <= r), dy ** 2 + dx ** 2 <= r * r, (dy <= r // 3) & (dx <= r),
                ((dy <= r // 3) & (dx <= r)) | ((dx <= r // 3) & (dy <= r))][label]
        image = 0.1 * torch.rand(3, n, n, generator=g)
        image[:, mask] += torch.rand(3, 1, generator=g) * 0.8 + 0.2
        return image, label


def shapes(size: int = 512) -> Dataset:
    return Shapes(size)


def stack(items: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """A collate function of your own (`collate: examples.custom_data:stack`): a batch of
    (images, labels) from (image, label) items, as default_collate makes it."""
    return torch.stack([x for x, _ in items]), torch.tensor([int(y) for _, y in items])
