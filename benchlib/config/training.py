"""The parameters every training study shares, declared once: the model and data
(benchlib.config.model_data), how batches reach it (`LoaderConfig`), how long and how
fast it learns (`ScheduleConfig`), how its ranks join (`LaunchConfig`), composed into
what a training worker trains with (`TrainingConfig`); how often a study launches it
(`RepeatsConfig`), and how many ranks it starts on a host and with what (`RanksConfig`,
`LauncherConfig`: the study's, not the worker's). A study's config builds on them, so a notebook's parameters cell
stays flat; the training workers generate their flags from the same fields
(benchlib.config.flags) and the studies hand them the fields by name
(`training_params`).

A field added here reaches every training study, its notebook's parameters, each
worker's flags and the run.json a study writes for it. A study that trains on its own
schedule (notebook 40: DLPerf's window) composes the pieces it shares, and its worker
parameters are still the training fields it has, by name."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_counts, require_min
from benchlib.config.choices import BACKENDS, LAUNCHERS, REPEAT_MODES
from benchlib.config.model_data import OwnDataConfig
from benchlib.config.studies import of_config
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
class LoaderConfig(StudyConfig):
    """How batches reach the model: where the prepared data lies, how many samples a step
    takes per device, how many processes load them."""

    path: str = "outputs/data"
    """Folder prepared by `benchlib data`, the same on every node."""
    batch_size: int = 32
    """Per device (seed 000: 32, seed 002: 64)."""
    num_workers: int = 0
    """DataLoader workers per rank."""

    def validate(self) -> None:
        super().validate()
        require_min("batch_size", self.batch_size, 1)
        require_min("num_workers", self.num_workers, 0)


@dataclasses.dataclass
class ScheduleConfig(StudyConfig):
    """How long the model learns and how fast: epochs, the steps left out of the timing
    at the start of each, SGD's learning rate and momentum."""

    epochs: int = 1
    """Epochs per launch."""
    warmup_steps: int = 3
    """Steps left out at the start of every epoch."""
    lr: float = 0.1
    """SGD learning rate."""
    momentum: float = 0.9
    """SGD momentum (seed 002 and DLPerf: 0.9)."""

    def validate(self) -> None:
        super().validate()
        require_min("epochs", self.epochs, 1)
        require_min("warmup_steps", self.warmup_steps, 0)
        if self.lr <= 0:
            raise ConfigError("lr", f"must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ConfigError("momentum", f"must be in [0, 1), got {self.momentum}")


@dataclasses.dataclass
class LaunchConfig(StudyConfig):
    """How the ranks join: the process group's backend and how long anything may take."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"backend": BACKENDS}

    backend: str = "auto"
    """auto (nccl on CUDA, gloo on CPU), gloo or nccl."""
    timeout_s: int = 600
    """The whole launch, and each rendezvous and collective, time out after this."""

    def validate(self) -> None:
        super().validate()
        require_min("timeout_s", self.timeout_s, 1)


@dataclasses.dataclass
class RanksConfig(StudyConfig):
    """How many ranks a study starts on each host: the study's, not the worker's (the
    launcher starts them; a worker's own --nproc-per-node is for a platform's variables).
    A study that runs more on a host by default says so in its `defaults`."""

    nproc_per_node: int = 1
    """Processes (ranks) started on each host, one device each (a strategy that runs one
    process asks for 1; DataParallel's one process spans this many GPUs)."""

    def validate(self) -> None:
        super().validate()
        require_min("nproc_per_node", self.nproc_per_node, 1)


@dataclasses.dataclass
class LauncherConfig(RanksConfig):
    """How a study starts its ranks on each host, and how many. The launchers a study
    runs are its `allowed` ones (notebook 30's: torchrun, lightning and srun), checked
    where every choice is (StudyConfig)."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"launcher": LAUNCHERS}

    launcher: str = "torchrun"
    """How the ranks start: torchrun (an agent per node, c10d rendezvous), mp_spawn (one
    process spawns the rest), tcp (one process per rank, tcp:// init), lightning
    (Lightning's own: a process per node, which starts its local ranks) or srun (inside
    a Slurm job), as the study allows."""


@dataclasses.dataclass
class TrainingConfig(LaunchConfig, ScheduleConfig, LoaderConfig, OwnDataConfig):
    """What a training worker (benchlib.workers.single, dp, ddp, lightning, elastic)
    trains with. The defaults are seed 002's; a study sets its own in its `defaults`."""

    max_steps: int = 0
    """Steps per epoch; 0 runs whole epochs."""

    def validate(self) -> None:
        super().validate()
        require_counts(self, ())  # the pieces checked each count; here the window's steps


def training_fields(cls: type) -> list[str]:
    """The fields of `cls` a training worker takes: those it has from TrainingConfig or
    the pieces TrainingConfig is composed of (a study that composes only some of them has
    those; a field of the same name a study declares itself is its own), and those of any
    config that extends one of them without being a study (a class a registry entry names:
    its own fields say how to launch, not what to train)."""
    pieces = tuple(set(TrainingConfig.__mro__) - {StudyConfig, object})
    return [f.name for f in dataclasses.fields(cls)
            if (owner := _declared_by(cls, f.name)) in pieces
            or (issubclass(owner, pieces) and of_config(owner) is None)]


def _declared_by(cls: type, name: str) -> type:
    """The class whose body declares field `name` (a study's `defaults` only re-default)."""
    return next(k for k in cls.__mro__ if name in vars(k).get("__annotations__", {})
                and name not in vars(k).get("defaults", {}))


def training_params(cfg: Any) -> dict[str, Any]:
    """The training fields of `cfg` and their values, by name: what the worker takes."""
    return {name: getattr(cfg, name) for name in training_fields(type(cfg))}
