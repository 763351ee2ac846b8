"""The dp_vs_ddp study's parameters (notebook 20_dp_vs_ddp)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.choices import STRATEGIES
from benchlib.config.fault_injection import FaultInjectionConfig
from benchlib.config.training import LauncherConfig, RepeatsConfig, TrainingConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class DpVsDdpConfig(TrainingConfig, RepeatsConfig, FaultInjectionConfig, LauncherConfig):
    """DataParallel vs DDP (notebook 20): seed 002's single_gpu.py, data_parallel.py and
    distributed_data_parallel.py, launched as subprocesses. The training and repeat
    parameters, with their seed 002 defaults, are benchlib.config.training's, and so are
    the launcher and the ranks on this host (ddp: ranks; dp: the GPUs its one process
    spans; single: 1); the faults it can inject (a rank that dies, a straggler:
    `benchlib diagnose`'s tests) benchlib.config.fault_injection's."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"strategy": STRATEGIES}
    defaults: ClassVar[dict[str, Any]] = {"nproc_per_node": 2}

    strategy: str = "ddp"
    """single (one device), dp (DataParallel over `nproc_per_node` GPUs) or ddp."""
    allreduce: bool = False
    """Also measure all-reduce bus bandwidth with the same ranks."""
    allreduce_max_bytes: int = 16777216
    """Largest all-reduce message (16 MiB; a GPU node: 256 MiB and more)."""
    export_trace: bool = False
    """After the timed epochs, trace a few more steps with torch.profiler: one Kineto trace
    per rank (details.trace_dir), which `benchlib diagnose` reads with Holistic Trace
    Analysis on a CUDA run (the `traces` extra)."""

    def validate(self) -> None:
        super().validate()
        if self.strategy == "single" and self.nproc_per_node != 1:
            raise ConfigError("nproc_per_node", "single runs one process on one device: set 1 "
                              "(dp: the GPUs its one process spans; ddp: ranks per node)")
        require_min("allreduce_max_bytes", self.allreduce_max_bytes, 1024)
