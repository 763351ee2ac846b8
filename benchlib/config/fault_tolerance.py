"""The fault_tolerance study's parameters (notebook 35_fault_tolerance)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.checkpoint import CheckpointConfig, parse_duration
from benchlib.config.choices import ELASTIC_DATASETS
from benchlib.config.fault_injection import FaultInjectionConfig
from benchlib.config.training import RanksConfig, TrainingConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class FaultToleranceConfig(TrainingConfig, FaultInjectionConfig, CheckpointConfig, RanksConfig):
    """Fault tolerance (notebook 35, seed 001): an elastic run through torchrun with
    `--max-restarts`, a rank killed on purpose, the restart, the resume from the last
    checkpoint; and the same run uninterrupted, to compare the final loss. The training
    parameters are benchlib.config.training's (the data sets the elastic trainer reads,
    or dummy: random images, no files), and so are the ranks (torchrun --standalone: its
    one launcher); the learning rate follows a cosine schedule. The
    failure is benchlib.config.fault_injection's, on by default here; how and how often
    it saves, benchlib.config.checkpoint's, each launch in a folder of its own under
    `checkpoint_path`."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"dataset": ELASTIC_DATASETS}
    defaults: ClassVar[dict[str, Any]] = {"dataset": "fashion-mnist", "model": "toynet",
                                          "epochs": 2, "max_steps": 20, "batch_size": 16,
                                          "warmup_steps": 5, "lr": 0.05, "fail_at_step": 15,
                                          "fail_rank": 1, "checkpoint_every": 4,
                                          "nproc_per_node": 2}

    max_restarts: int = 1
    """torchrun --max-restarts."""
    compare_uninterrupted: bool = True
    """Also run it without the failure and compare the final loss."""
    mtbf: str = "12h"
    """Mean time between failures of the cluster the run is for (12h, 30m, 2d): the
    save interval that maximises goodput (Young/Daly) and the goodput at it and at this
    run's own interval, from the measured checkpoint cost."""

    def validate(self) -> None:
        super().validate()
        require_min("max_restarts", self.max_restarts, 0)
        parse_duration("mtbf", self.mtbf)
        if not 0 <= self.fail_rank < self.nproc_per_node:
            raise ConfigError("fail_rank", f"must be in [0, {self.nproc_per_node}), got {self.fail_rank}")
        if self.fail_at_step and not self.max_restarts:
            raise ConfigError("max_restarts", "0 with a failure injected: the run cannot recover; "
                              "set max_restarts >= 1 or fail_at_step 0")
