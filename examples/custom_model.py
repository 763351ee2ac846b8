"""A model of your own, as benchlib takes one: a function that returns a torch.nn.Module.
Its keyword arguments come from `model_args` (a mapping in a parameter table, or
`--model-args '{"width": 32}'` on a worker's command line):

    python -m benchlib.workers.single --model examples.custom_model:build \
        --model-args '{"width": 32}' --dataset examples.custom_data:shapes --epochs 1
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class WideCNN(nn.Module):
    """Three conv blocks of `width` channels, global average pooling, a linear head."""

    def __init__(self, width: int, num_classes: int, in_channels: int):
        super().__init__()
        blocks, channels = [], in_channels
        for _ in range(3):
            blocks += [nn.Conv2d(channels, width, 3, padding=1, bias=False),
                       nn.BatchNorm2d(width), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            channels = width
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def build(width: int = 32, num_classes: int = 4, in_channels: int = 3) -> nn.Module:
    """The model benchlib builds on every rank (the same seed gives the same weights)."""
    return WideCNN(width, num_classes, in_channels)


def smoothed_cross_entropy(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """A loss of your own (`loss: examples.custom_model:smoothed_cross_entropy`)."""
    return F.cross_entropy(output, labels, label_smoothing=0.1)
