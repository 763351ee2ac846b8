"""The parameters every training study shares, declared once: what its worker trains with
(`TrainingConfig`) and how often the study launches it (`RepeatsConfig`). A study's
config builds on them (dp_vs_ddp, multinode_lightning), so a notebook's parameters cell
stays flat; the training workers generate their flags from the same fields
(benchlib.config.flags) and the studies hand them the fields by name (`training_params`).

A field added here reaches every training study, its notebook's parameters, each
worker's flags and the run.json a study writes for it."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_counts, require_min
from benchlib.config.choices import BACKENDS, DEVICES, GRAY_28, MODELS, REPEAT_MODES, TRAIN_DATASETS
from benchlib.errors import ConfigError


@dataclasses.dataclass
class RepeatsConfig(StudyConfig):
    """How a study samples a run's spread: the study's, not the worker's."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"repeat_mode": REPEAT_MODES}

    repeats: int = 1
    """Launches of the whole run, each with fresh processes."""
    repeat_mode: str = "epoch"
    """One sample of the spread: epoch (every epoch of every launch) or process (each
    launch, its median over its epochs: the spread includes start-up and placement)."""

    def validate(self) -> None:
        super().validate()
        require_min("repeats", self.repeats, 1)


@dataclasses.dataclass
class TrainingConfig(StudyConfig):
    """What a training worker (benchlib.workers.single, dp, ddp, lightning, elastic)
    trains with. The defaults are seed 002's; a study sets its own in its `defaults`."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {
        "dataset": TRAIN_DATASETS, "model": MODELS, "device": DEVICES, "backend": BACKENDS}

    dataset: str = "cifar10"
    """The data set: one prepared by `benchlib data` (fashion-mnist, mydataset, cifar10,
    imagefolder), or one made without files where the study allows it (synthetic: one
    batch made on the device, no IO; dummy: random images)."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`, the same on every node."""
    model: str = "pyramidnet"
    """pyramidnet (seed 002), simplecnn, toynet (28x28 data only), resnet18 or resnet50."""
    depth: int = 20
    """PyramidNet depth, 6n + 2 (the paper's CIFAR setting: 110)."""
    alpha: int = 48
    """PyramidNet widening (the paper's CIFAR setting: 270)."""
    epochs: int = 1
    """Epochs per launch."""
    batch_size: int = 32
    """Per device (seed 000: 32, seed 002: 64)."""
    num_workers: int = 0
    """DataLoader workers per rank."""
    warmup_steps: int = 3
    """Steps left out at the start of every epoch."""
    max_steps: int = 0
    """Steps per epoch; 0 runs whole epochs."""
    lr: float = 0.1
    """SGD learning rate (momentum 0.9)."""
    device: str = "auto"
    """cpu, gpu or auto."""
    backend: str = "auto"
    """auto (nccl on CUDA, gloo on CPU), gloo or nccl."""
    timeout_s: int = 600
    """The whole launch, and each rendezvous and collective, time out after this."""
    seed: int = 0
    """Seed of weights, shuffling and augmentation."""

    def validate(self) -> None:
        super().validate()
        if self.model == "pyramidnet" and (self.depth - 2) % 6:
            raise ConfigError("depth", f"PyramidNet depth must be 6n + 2 (20, 32, 110), got "
                              f"{self.depth}")
        if self.model == "toynet" and self.dataset not in (*GRAY_28, "dummy"):  # any shape
            raise ConfigError("model", "toynet takes 1x28x28 inputs: use fashion-mnist or "
                              "mydataset, or simplecnn / pyramidnet")
        if self.model.startswith("resnet") and self.dataset in GRAY_28:
            raise ConfigError("model", f"{self.model} takes 3-channel images: use cifar10, "
                              "imagefolder or synthetic, or toynet / simplecnn / pyramidnet")
        require_counts(self, ("epochs", "batch_size", "timeout_s"))

    def training_params(self) -> dict[str, Any]:
        """The training fields and their values, by name: what the worker takes."""
        return {name: getattr(self, name) for name in training_fields(type(self))}


def training_fields(cls: type) -> list[str]:
    """The fields of `cls` a training worker takes: those TrainingConfig declares, and
    those of any config that extends it without being a study (a class that sets `study`:
    its own fields say how to launch, not what to train)."""
    declared: set[str] = set()
    for klass in cls.__mro__:
        if issubclass(klass, TrainingConfig) and not vars(klass).get("study"):
            declared |= set(vars(klass).get("__annotations__", {}))
    return [f.name for f in dataclasses.fields(cls) if f.name in declared]
