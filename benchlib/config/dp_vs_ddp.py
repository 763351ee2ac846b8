"""The dp_vs_ddp study's parameters (notebook 20_dp_vs_ddp)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from benchlib.config.base import StudyConfig, check_training, require_choice, require_min
from benchlib.config.choices import BACKENDS, LAUNCHERS, REPEAT_MODES, STRATEGIES
from benchlib.errors import ConfigError


@dataclasses.dataclass
class DpVsDdpConfig(StudyConfig):
    """DataParallel vs DDP (notebook 20): seed 002's single_gpu.py, data_parallel.py and
    distributed_data_parallel.py, launched as subprocesses."""

    study: ClassVar[str] = "dp_vs_ddp"

    strategy: str = "ddp"
    """single (one device), dp (DataParallel over `nproc_per_node` GPUs) or ddp."""
    launcher: str = "torchrun"
    """How DDP ranks start: torchrun, mp_spawn or tcp (one process per rank, tcp:// init)."""
    nproc_per_node: int = 2
    """ddp: ranks on this host; dp: the GPUs its one process spans; single: 1."""
    dataset: str = "cifar10"
    """cifar10, fashion-mnist, mydataset, imagefolder or synthetic (no IO)."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`."""
    model: str = "pyramidnet"
    """pyramidnet (seed 002), simplecnn, toynet (28x28 data only), resnet18 or resnet50."""
    depth: int = 20
    """PyramidNet depth, 6n + 2 (the paper's CIFAR setting: 110)."""
    alpha: int = 48
    """PyramidNet widening (the paper's CIFAR setting: 270)."""
    epochs: int = 1
    """Epochs per launch."""
    repeats: int = 1
    """Launches of the whole run, each with fresh processes."""
    repeat_mode: str = "epoch"
    """One sample of the spread: epoch (every epoch of every launch) or process (each
    launch, its median over its epochs)."""
    batch_size: int = 32
    """Per device (seed 002: 64)."""
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
    allreduce: bool = False
    """Also measure all-reduce bus bandwidth with the same ranks."""
    allreduce_max_bytes: int = 16777216
    """Largest all-reduce message (16 MiB; a GPU node: 256 MiB and more)."""
    timeout_s: int = 600
    """The whole launch, and each rendezvous and collective, time out after this."""
    seed: int = 0
    """Seed of weights, shuffling and augmentation."""

    def validate(self) -> None:
        require_choice("strategy", self.strategy, STRATEGIES)
        require_choice("launcher", self.launcher, LAUNCHERS)
        require_choice("backend", self.backend, BACKENDS)
        require_choice("repeat_mode", self.repeat_mode, REPEAT_MODES)
        require_min("nproc_per_node", self.nproc_per_node, 1)
        require_min("repeats", self.repeats, 1)
        if self.strategy == "single" and self.nproc_per_node != 1:
            raise ConfigError("nproc_per_node", "single runs one process on one device: set 1 "
                              "(dp: the GPUs its one process spans; ddp: ranks per node)")
        check_training(self)
        require_min("allreduce_max_bytes", self.allreduce_max_bytes, 1024)
