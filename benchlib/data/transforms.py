"""One set of image transforms per data set, for every trainer (DDP/DataParallel,
Lightning, elastic): training with its augmentation, evaluation without.

- imagefolder (ImageNet layout): pytorch/examples' recipe. Training: RandomResizedCrop to
  `image_size` and a horizontal flip; evaluation (and training without augmentation):
  resize the short side to `image_size * 256 / 224`, then a centre crop of `image_size`.
- cifar10: seed 002's training transforms (4-pixel padded random crop, flip); none for
  evaluation.
- fashion-mnist: none (it is decoded straight to tensors; see benchlib.data.storage).
Both normalize with the data set's channel means and standard deviations."""

from __future__ import annotations

from typing import Any

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def imagefolder(image_size: int, augment: bool) -> Any:
    """ImageNet-layout JPEGs: random crop and flip when `augment`, else resize and centre
    crop (what evaluation uses)."""
    from torchvision import transforms

    steps = ([transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip()]
             if augment else
             [transforms.Resize(image_size * 256 // 224), transforms.CenterCrop(image_size)])
    return transforms.Compose([*steps, transforms.ToTensor(),
                               transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def cifar10(augment: bool) -> Any:
    """CIFAR-10: padded random crop and flip when `augment`; normalized either way."""
    from torchvision import transforms

    steps = [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()] \
        if augment else []
    return transforms.Compose([*steps, transforms.ToTensor(),
                               transforms.Normalize(CIFAR_MEAN, CIFAR_STD)])
