"""Training checkpoints (the state a run resumes from; activation checkpointing is
benchlib.config.performance's `ac`): how a trainer saves, how often and where. Declared
once; notebook 35 composes it, and the elastic and ddp workers generate their flags from
it (benchlib.config.flags). A duration such as an MTBF (`12h`) is read here too, so that
a config and `benchlib project --mtbf` read it alike."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_min
from benchlib.config.choices import CHECKPOINT_MODES
from benchlib.errors import ConfigError


@dataclasses.dataclass
class CheckpointConfig(StudyConfig):
    """How a run saves the state it can resume from (model, optimizer, schedule, position,
    RNG states)."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"checkpoint": CHECKPOINT_MODES}

    checkpoint: str = "torch_save"
    """torch_save (rank 0 writes the whole state), dcp (torch.distributed.checkpoint: each
    rank writes its part; FSDP2 runs save their shards), dcp_async (DCP's async_save: the
    state staged to CPU memory, written in the background while training goes on) or
    dcp_async_pinned (staged into pinned memory: the faster copy from a GPU)."""
    checkpoint_every: int = 0
    """Steps between checkpoints; 0: none between (the elastic trainer still saves at the
    end of every epoch)."""
    checkpoint_path: str = "outputs/checkpoints"
    """The folder checkpoints go to, shared by every node: local disk, NFS, Lustre."""

    def validate(self) -> None:
        super().validate()
        check_checkpoint(self)


def check_checkpoint(values: Any) -> None:
    """The checkpoint fields, in a config or a worker's parsed flags."""
    if hasattr(values, "checkpoint_every"):
        require_min("checkpoint_every", values.checkpoint_every, 0)
    if getattr(values, "checkpoint_path", None) == "":
        raise ConfigError("checkpoint_path", "is empty; give a folder every rank can write")


UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*")


def parse_duration(field: str, text: str | float) -> float:
    """Seconds from `12h`, `30m`, `90s`, `2d` or a plain number of seconds; a ConfigError
    naming `field` otherwise."""
    match = _DURATION.fullmatch(str(text).lower())
    unit = match[2] or "s" if match else ""
    if not match or unit not in UNITS or not math.isfinite(float(match[1])) \
            or float(match[1]) <= 0:
        raise ConfigError(field, f"{text!r} is not a duration above 0: a number with s, m, h "
                          "or d (12h, 30m, 3600s, 2d)")
    return float(match[1]) * UNITS[unit]
