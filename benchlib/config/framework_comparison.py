"""The framework_comparison study's parameters (notebook 40_framework_comparison)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.choices import (
    DATASET_FORMS,
    FRAMEWORK_DATASETS,
    REPEAT_MODES,
    dataset_kind,
)
from benchlib.config.model_data import OwnDataConfig
from benchlib.config.performance import PerformanceConfig
from benchlib.config.training import LaunchConfig, LauncherConfig, LoaderConfig
from benchlib.errors import ConfigError

# the fields benchlib.workers.jax_resnet takes of a row, its flags generated from them (its
# repeats are the windows of one launch, its learning rate DLPerf's unless given)
JAX_FIELDS = ("model", "batch_size", "image_size", "skip_steps", "warmup_steps", "timed_steps",
              "seed", "precision")


@dataclasses.dataclass
class FrameworkComparisonConfig(PerformanceConfig, LaunchConfig, LoaderConfig, OwnDataConfig,
                                LauncherConfig):
    """ResNet throughput measured the DLPerf way (notebook 40, seed 003): skip the first
    `skip_steps`, warm up `warmup_steps` more, average the next `timed_steps`.

    The model and data, the loader, the launch and the launcher (with several devices,
    one rank each) are the training studies' (benchlib.config.model_data, benchlib.
    config.training), the performance settings benchlib.
    config.performance's; the schedule is DLPerf's own (its window, its learning rate
    of global batch / 1000), and so are its repeats: windows, in one launch or each in
    its own. `arch`, this study's old name for `model`, is still read in a table."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"repeat_mode": REPEAT_MODES}
    defaults: ClassVar[dict[str, Any]] = {"model": "resnet50", "dataset": "synthetic",
                                          "batch_size": 128, "num_workers": 4,
                                          "timeout_s": 1800}
    renamed: ClassVar[dict[str, str]] = {"arch": "model"}

    skip_steps: int = 5
    """DLPerf: iterations skipped first."""
    warmup_steps: int = 20
    """DLPerf: further warm-up iterations, not timed."""
    timed_steps: int = 100
    """DLPerf: iterations averaged."""
    repeats: int = 3
    """Repeats of the window, each one sample of the spread; the median is reported."""
    repeat_mode: str = "epoch"
    """epoch (the repeats are windows in one launch) or process (a fresh launch of one
    window per repeat; JAX beside it the same)."""
    compare_jax: bool = True
    """Also train the same ResNet in JAX here, same timing (one device, synthetic data)."""

    def validate(self) -> None:
        if self.dataset not in FRAMEWORK_DATASETS and dataset_kind(self.dataset) != "entry":
            raise ConfigError("dataset", f"{self.dataset!r} is not one of "
                              f"{', '.join(FRAMEWORK_DATASETS)}, nor {DATASET_FORMS}")
        super().validate()
        for name in ("timed_steps", "repeats"):
            require_min(name, getattr(self, name), 1)
        for name in ("skip_steps", "warmup_steps"):
            require_min(name, getattr(self, name), 0)
        require_min("image_size", self.image_size, 32)

    @property
    def steps(self) -> int:
        return self.skip_steps + self.warmup_steps + self.timed_steps
