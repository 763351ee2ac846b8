"""The multinode_lightning study's parameters (notebook 30_multinode_lightning)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from benchlib.config.base import StudyConfig, check_training, require_choice, require_min
from benchlib.config.choices import BACKENDS, MULTINODE_LAUNCHERS, MULTINODE_TRAINERS, REPEAT_MODES
from benchlib.errors import ConfigError


@dataclasses.dataclass
class MultinodeLightningConfig(StudyConfig):
    """Lightning DDP against raw DDP across nodes (notebook 30, seeds 000 and 001):
    the same model and data, `nnodes` x `nproc_per_node` ranks."""

    study: ClassVar[str] = "multinode_lightning"

    trainer: str = "lightning"
    """lightning (a LightningModule, Trainer(strategy="ddp")) or ddp (benchlib's DDP loop)."""
    launcher: str = "torchrun"
    """torchrun (one agent per node, c10d rendezvous), lightning (Lightning's own: one
    process per node, it starts the local ranks) or srun (inside a Slurm job)."""
    nnodes: int = 2
    """Nodes; locally, each is its own agent or process group on this host."""
    nproc_per_node: int = 1
    """Devices (ranks) per node: the seed's --gpus."""
    dataset: str = "fashion-mnist"
    """fashion-mnist (seed 000), mydataset, cifar10, imagefolder or synthetic."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`, the same on every node."""
    model: str = "toynet"
    """toynet (28x28 data), simplecnn, pyramidnet, resnet18 or resnet50."""
    depth: int = 20
    """PyramidNet depth, 6n + 2."""
    alpha: int = 48
    """PyramidNet widening."""
    epochs: int = 2
    """Epochs per launch (seed: 5)."""
    repeats: int = 1
    """Launches of the whole run (seed: 10), each with fresh processes."""
    repeat_mode: str = "epoch"
    """One sample of the spread: epoch (every epoch of every launch) or process (each
    launch, its median over its epochs: the spread includes start-up and placement)."""
    batch_size: int = 32
    """Per device (seed 000: 32)."""
    num_workers: int = 0
    """DataLoader workers per rank."""
    warmup_steps: int = 3
    """Steps left out at the start of every epoch."""
    max_steps: int = 0
    """Steps per epoch; 0 runs whole epochs."""
    lr: float = 0.01
    """SGD learning rate (momentum 0.9)."""
    device: str = "auto"
    """cpu, gpu or auto."""
    backend: str = "auto"
    """auto (nccl on CUDA, gloo on CPU), gloo or nccl."""
    join_timeout_s: int = 120
    """How long the nodes wait for each other at the rendezvous before failing."""
    timeout_s: int = 900
    """The whole launch, and every collective, time out after this."""
    seed: int = 0
    """Seed of weights, shuffling and augmentation."""

    def validate(self) -> None:
        require_choice("trainer", self.trainer, MULTINODE_TRAINERS)
        require_choice("launcher", self.launcher, MULTINODE_LAUNCHERS)
        require_choice("backend", self.backend, BACKENDS)
        require_choice("repeat_mode", self.repeat_mode, REPEAT_MODES)
        if self.trainer == "ddp" and self.launcher == "lightning":
            raise ConfigError("launcher", "lightning is Lightning's own launcher; trainer ddp "
                              "starts with torchrun or srun")
        require_min("nnodes", self.nnodes, 1)
        require_min("nproc_per_node", self.nproc_per_node, 1)
        require_min("join_timeout_s", self.join_timeout_s, 1)
        require_min("repeats", self.repeats, 1)
        check_training(self)

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node
