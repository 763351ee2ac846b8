"""The multinode_lightning study's parameters (notebook 30_multinode_lightning)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.choices import MULTINODE_LAUNCHERS, MULTINODE_TRAINERS
from benchlib.config.training import LauncherConfig, RepeatsConfig, TrainingConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class MultinodeLightningConfig(TrainingConfig, RepeatsConfig, LauncherConfig):
    """Lightning DDP against raw DDP across nodes (notebook 30, seeds 000 and 001):
    the same model and data, `nnodes` x `nproc_per_node` ranks (`nproc_per_node`: the
    seed's --gpus). The training and repeat parameters are benchlib.config.training's,
    with seed 000's defaults, and so are the launcher and the ranks per node; the
    launchers it runs are its own (torchrun, lightning, srun)."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"trainer": MULTINODE_TRAINERS,
                                                     "launcher": MULTINODE_LAUNCHERS}
    defaults: ClassVar[dict[str, Any]] = {"dataset": "fashion-mnist", "model": "toynet",
                                          "epochs": 2, "lr": 0.01, "timeout_s": 900}

    trainer: str = "lightning"
    """lightning (a LightningModule, Trainer(strategy="ddp")) or ddp (benchlib's DDP loop)."""
    nnodes: int = 2
    """Nodes; locally, each is its own agent or process group on this host."""
    join_timeout_s: int = 120
    """How long the nodes wait for each other at the rendezvous before failing."""

    def validate(self) -> None:
        if self.trainer == "ddp" and self.launcher == "lightning":
            raise ConfigError("launcher", "lightning is Lightning's own launcher; trainer ddp "
                              "starts with torchrun or srun")
        require_min("nnodes", self.nnodes, 1)
        require_min("join_timeout_s", self.join_timeout_s, 1)
        super().validate()

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node
