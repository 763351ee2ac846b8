"""The models the studies train, by name. torchvision models get weights=None (no download)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from benchlib.config.choices import MODELS
from benchlib.errors import ConfigError


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
    """Two conv blocks and a linear head, for any CxHxW input (H and W divisible by 4)."""

    def __init__(self, num_classes: int = 10, in_shape: tuple[int, int, int] = (1, 28, 28)):
        super().__init__()
        c, h, w = in_shape
        self.net = nn.Sequential(
            nn.Conv2d(c, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * (h // 4) * (w // 4), num_classes),
        )

    def forward(self, x):
        return self.net(x)


class _PyramidBlock(nn.Module):
    """Pre-activation basic block whose output has more channels than its input; the
    shortcut is zero-padded to match (PyramidNet, Han et al., CVPR 2017)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.stride = stride

    def forward(self, x):
        out = self.conv1(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(out)))
        out = self.bn3(out)
        shortcut = F.avg_pool2d(x, 2) if self.stride == 2 else x
        pad = out.shape[1] - shortcut.shape[1]
        if pad:
            shortcut = F.pad(shortcut, (0, 0, 0, 0, 0, pad))
        return out + shortcut


class PyramidNet(nn.Module):
    """PyramidNet for CIFAR (seed 002's model): `depth` = 6n + 2 layers of basic blocks in
    three stages, the width growing by `alpha` in total, one step per block. The paper's
    CIFAR configuration is depth 110, alpha 270; small ones (20, 48) suit a CPU."""

    def __init__(self, depth: int = 20, alpha: int = 48, num_classes: int = 10,
                 in_channels: int = 3):
        super().__init__()
        if (depth - 2) % 6:
            raise ConfigError("depth", f"must be 6n + 2 (20, 32, 56, 110, ...), got {depth}")
        n = (depth - 2) // 6
        step = alpha / (3 * n)
        width, blocks = 16.0, []
        self.conv = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        in_ch = 16
        for stage in range(3):
            for i in range(n):
                width += step
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(_PyramidBlock(in_ch, round(width), stride))
                in_ch = round(width)
        self.blocks = nn.Sequential(*blocks)
        self.bn_out = nn.BatchNorm2d(in_ch)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x):
        x = self.blocks(self.bn(self.conv(x)))
        x = F.relu(self.bn_out(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model(name: str, in_shape: tuple[int, int, int] = (1, 28, 28), depth: int = 20,
                alpha: int = 48) -> nn.Module:
    if name == "toynet":
        if in_shape != (1, 28, 28):
            raise ConfigError("model", f"toynet takes 1x28x28 inputs, not {'x'.join(map(str, in_shape))}; "
                             "use simplecnn or pyramidnet")
        return ToyNet()
    if name == "simplecnn":
        return SimpleCNN(in_shape=in_shape)
    if name == "pyramidnet":
        return PyramidNet(depth, alpha, in_channels=in_shape[0])
    if name in ("resnet18", "resnet50"):
        import torchvision

        return getattr(torchvision.models, name)(weights=None)  # 1000 classes, as on ImageNet
    raise ConfigError("model", f"{name!r} is not one of {', '.join(MODELS)}")
