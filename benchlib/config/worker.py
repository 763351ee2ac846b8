"""What a training worker takes beyond a study's parameters, declared as config fields so
that its flags are generated like the rest (benchlib.config.flags): the seeds' own
switches (shuffle, augment, a log line every N steps, seed 002's saved model), what a
study's launch sets for one launch (DataParallel's devices, the first losses a
comparison reads, no log lines), and the comm hook that times DDP's all-reduce.

No study's config composes this piece, so none of it is a notebook's parameter, a
table's column or a record's parameter: a study hands a worker the ones it sets by name,
in the run.json (benchlib.studies.training). The injected faults only the tests set are
benchlib.config.fault_injection's `WorkerFaultsConfig`, the compile cache's folders
benchlib.config.performance's `CompileCacheConfig`: pieces no study composes either."""

from __future__ import annotations

import dataclasses
from typing import Any

from benchlib.config.base import StudyConfig, require_min


@dataclasses.dataclass
class WorkerConfig(StudyConfig):
    """A training worker's own settings: the ddp workers take them all, the elastic and
    Lightning workers those their loops apply."""

    shuffle: bool = True
    """Shuffle the training samples every epoch (off: the same order each time)."""
    augment: bool = True
    """Random crops and flips of the training images (off: the images as stored)."""
    log_interval: int = 20
    """A progress line every this many steps (seed 002's --log-interval); 0: none, as a
    study's launches run."""
    record_losses: int = 0
    """Record the rank-averaged loss of the first N steps (the compile study's and the
    tests' comparisons of what was learned)."""
    save_model: bool = False
    """Save the trained model's state_dict as train_dir/model.pt (seed 002's --save-model)."""
    train_dir: str = "outputs/checkpoints"
    """Where --save-model writes (seed 002's --train-dir)."""
    dp_devices: int = 0
    """dp: the GPUs DataParallel spans (0 = every visible one); notebook 20's launch sets
    its nproc_per_node."""
    comm_timer: bool = True
    """DDP: time the all-reduce bucket by bucket with a comm hook (off: DDP's own
    all-reduce in its place, the hook's cost in docs/diagnose.md; the record then says
    its communication is unknown)."""

    def validate(self) -> None:
        super().validate()
        check_worker(self)


def check_worker(values: Any) -> None:
    """The worker's own counts, in a config or a worker's parsed flags."""
    for name in ("log_interval", "record_losses", "dp_devices"):
        if hasattr(values, name):
            require_min(name, getattr(values, name), 0)
