"""The models the studies train, by name. torchvision models get weights=None (no download)."""

from __future__ import annotations

from torch import nn

from benchlib.config import MODELS


class ToyNet(nn.Module):
    """Seed 000's model: an MLP 784-512-512-10 with ReLU (the PyTorch quickstart network)."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(28 * 28, 512), nn.ReLU(),
            nn.Linear(512, 512), nn.ReLU(),
            nn.Linear(512, num_classes),
        )

    def forward(self, x):
        return self.net(x)


class SimpleCNN(nn.Module):
    """Two conv blocks and a linear head, for 1x28x28 inputs."""

    def __init__(self, num_classes: int = 10, channels: int = 1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, num_classes),
        )

    def forward(self, x):
        return self.net(x)


def build_model(name: str) -> nn.Module:
    if name == "toynet":
        return ToyNet()
    if name == "simplecnn":
        return SimpleCNN()
    raise ValueError(f"model: {name!r} is not one of {', '.join(MODELS)}")
