"""The fault_tolerance study's parameters (notebook 35_fault_tolerance)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from benchlib.config.base import StudyConfig, require_choice, require_min
from benchlib.config.choices import DEVICES, ELASTIC_DATASETS, GRAY_28, MODELS
from benchlib.errors import ConfigError


@dataclasses.dataclass
class FaultToleranceConfig(StudyConfig):
    """Fault tolerance (notebook 35, seed 001): an elastic run through torchrun with
    `--max-restarts`, a rank killed on purpose, the restart, the resume from the last
    checkpoint; and the same run uninterrupted, to compare the final loss."""

    study: ClassVar[str] = "fault_tolerance"

    dataset: str = "fashion-mnist"
    """fashion-mnist, mydataset, cifar10, imagefolder or dummy (random images, no files)."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`."""
    model: str = "toynet"
    """toynet (28x28 data), simplecnn, pyramidnet, resnet18 or resnet50."""
    nproc_per_node: int = 2
    """Ranks (torchrun --standalone)."""
    epochs: int = 2
    """Epochs."""
    max_steps: int = 20
    """Steps per epoch; 0 runs whole epochs."""
    batch_size: int = 16
    """Per rank."""
    lr: float = 0.05
    """SGD learning rate (momentum 0.9, cosine schedule)."""
    checkpoint_every: int = 4
    """Steps between checkpoints (and one at the end of every epoch)."""
    max_restarts: int = 1
    """torchrun --max-restarts."""
    fail_at_step: int = 15
    """Kill a rank after this global step in the first attempt; 0: no failure."""
    fail_rank: int = 1
    """The rank killed."""
    compare_uninterrupted: bool = True
    """Also run it without the failure and compare the final loss."""
    device: str = "auto"
    """cpu, gpu or auto."""
    timeout_s: int = 600
    """The whole launch, and every collective."""
    seed: int = 0
    """Seed of weights, data order and augmentation."""

    def validate(self) -> None:
        require_choice("dataset", self.dataset, ELASTIC_DATASETS)
        require_choice("model", self.model, MODELS)
        require_choice("device", self.device, DEVICES)
        for name in ("nproc_per_node", "epochs", "batch_size", "timeout_s"):
            require_min(name, getattr(self, name), 1)
        for name in ("max_steps", "checkpoint_every", "max_restarts", "fail_at_step"):
            require_min(name, getattr(self, name), 0)
        if not 0 <= self.fail_rank < self.nproc_per_node:
            raise ConfigError("fail_rank", f"must be in [0, {self.nproc_per_node}), got {self.fail_rank}")
        if self.fail_at_step and not self.max_restarts:
            raise ConfigError("max_restarts", "0 with a failure injected: the run cannot recover; "
                              "set max_restarts >= 1 or fail_at_step 0")
        if self.model == "toynet" and self.dataset not in (*GRAY_28, "dummy"):
            raise ConfigError("model", "toynet takes 1x28x28 inputs: use fashion-mnist or "
                              "mydataset, or simplecnn / pyramidnet")
