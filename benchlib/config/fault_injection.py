"""Faults injected on purpose, never a real measurement: a rank that dies at a step, a
rank that is slower at every step. Declared once; notebooks 20 and 35 compose them, and
the training workers generate their flags from them (benchlib.config.flags), each
taking those its loop injects. The tests, `benchlib calibrate --ground-truth` and
`benchlib diagnose` make their failures and stragglers with them; the faults only a
worker's flags inject (how the failing rank fails, a slower link) are `WorkerFaultsConfig`,
which no study composes: a notebook never sets them."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_min
from benchlib.config.choices import DELAY_PATTERNS, FAIL_HOWS


@dataclasses.dataclass
class FaultInjectionConfig(StudyConfig):
    """A failure and a straggler made on purpose; off by default."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"inject_delay_pattern": DELAY_PATTERNS}

    fail_at_step: int = 0
    """Kill rank `fail_rank` after this global step (the first attempt only, where a run
    restarts; where the step starts an asynchronous checkpoint, inside its background
    write); 0: no failure."""
    fail_rank: int = 0
    """The rank `fail_at_step` kills."""
    inject_step_delay_ms: float = 0.0
    """ms added to every step of `delay_rank`, inside its timing (a sleep on CPU, a spin
    kernel on CUDA): a straggler made on purpose, the truth `benchlib calibrate
    --ground-truth` checks against."""
    delay_rank: int = -1
    """The rank `inject_step_delay_ms` slows (-1: every rank; the slow rank of
    `inject_delay_pattern` slow_rank, -1: the last)."""
    inject_delay_pattern: str = "uniform"
    """How `inject_step_delay_ms` varies (benchlib.core.delays.delay_factor): uniform,
    slow_warmup (warm-up steps 5x), heavy_tail (every fifth step 6x), slow_epoch (the
    second epoch 4x) or slow_rank (every rank, `delay_rank` 2x)."""

    def validate(self) -> None:
        super().validate()
        check_faults(self)


@dataclasses.dataclass
class WorkerFaultsConfig(StudyConfig):
    """Faults the tests and `benchlib diagnose`'s cases inject through a ddp worker's flags
    (the study hands them in its run.json), never a notebook: off by default."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"fail_how": FAIL_HOWS}

    fail_how: str = "raise"
    """How `fail_at_step`'s rank fails: raise (an exception: its marker and log line) or
    kill (it SIGKILLs itself, as the OOM killer does: no exception, no cleanup)."""
    inject_comm_delay_ms: float = 0.0
    """DDP on more than one rank: the last gradient bucket of every step waits this many
    ms inside its all-reduce, a slower link made on purpose (`benchlib diagnose`'s
    tests), never a real run."""

    def validate(self) -> None:
        super().validate()
        check_faults(self)


def check_faults(values: Any) -> None:
    """The injected faults' counts, in a config or a worker's parsed flags. A rank is not
    bounded by the ranks asked for here: a run that leaves it out keeps it."""
    for name in ("fail_at_step", "fail_rank", "inject_step_delay_ms", "inject_comm_delay_ms"):
        if hasattr(values, name):
            require_min(name, getattr(values, name), 0)
    if hasattr(values, "delay_rank"):
        require_min("delay_rank", values.delay_rank, -1)
