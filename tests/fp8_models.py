"""Models the float8 tests build: one with no linear layer at all (float8 training has
nothing to convert), for `precision`'s refusal."""

from torch import nn


def convnet() -> nn.Module:
    """3x8x8 images to 10 classes through convolutions and a pool: no nn.Linear."""
    return nn.Sequential(nn.Conv2d(3, 10, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
