"""The framework_comparison study's parameters (notebook 40_framework_comparison)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from benchlib.config.base import StudyConfig, require_choice, require_min
from benchlib.config.choices import (
    ARCHS,
    BACKENDS,
    DEVICES,
    FRAMEWORK_DATASETS,
    LAUNCHERS,
    PRECISIONS,
    REPEAT_MODES,
)


@dataclasses.dataclass
class FrameworkComparisonConfig(StudyConfig):
    """ResNet throughput measured the DLPerf way (notebook 40, seed 003): skip the first
    `skip_steps`, warm up `warmup_steps` more, average the next `timed_steps`."""

    study: ClassVar[str] = "framework_comparison"

    arch: str = "resnet50"
    """resnet50 (seed 003: ResNet-50 v1.5, torchvision's) or resnet18."""
    dataset: str = "synthetic"
    """synthetic (one batch made on the device: compute only) or imagefolder (JPEGs)."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data` (imagefolder), or holding your ImageNet copy."""
    image_size: int = 224
    """Input side in pixels (224 as on ImageNet; small on CPU)."""
    batch_size: int = 128
    """Per device (seed 003: 32, 64, 128, 160)."""
    nproc_per_node: int = 1
    """Devices (one rank each) on this host."""
    launcher: str = "torchrun"
    """How ranks start when there are several: torchrun, mp_spawn or tcp."""
    precision: str = "fp32"
    """fp32, tf32 (Ampere+), amp_bf16, amp_fp16 (CUDA)."""
    channels_last: bool = False
    """NHWC memory format (faster with AMP on tensor cores)."""
    compile: bool = False
    """torch.compile the model (its compile time falls in the skipped steps)."""
    skip_steps: int = 5
    """DLPerf: iterations skipped first."""
    warmup_steps: int = 20
    """DLPerf: further warm-up iterations, not timed."""
    timed_steps: int = 100
    """DLPerf: iterations averaged."""
    compare_jax: bool = True
    """Also train the same ResNet in JAX here, same timing (one device, synthetic data)."""
    repeats: int = 3
    """Repeats of the window, each one sample of the spread; the median is reported."""
    repeat_mode: str = "epoch"
    """epoch (the repeats are windows in one launch) or process (a fresh launch of one
    window per repeat; JAX beside it the same)."""
    num_workers: int = 4
    """DataLoader workers per rank (imagefolder)."""
    device: str = "auto"
    """cpu, gpu or auto."""
    backend: str = "auto"
    """auto (nccl on CUDA, gloo on CPU), gloo or nccl."""
    timeout_s: int = 1800
    """The whole launch, each rendezvous and collective."""
    seed: int = 0
    """Seed of weights and data."""

    def validate(self) -> None:
        require_choice("arch", self.arch, ARCHS)
        require_choice("dataset", self.dataset, FRAMEWORK_DATASETS)
        require_choice("precision", self.precision, PRECISIONS)
        require_choice("launcher", self.launcher, LAUNCHERS)
        require_choice("device", self.device, DEVICES)
        require_choice("backend", self.backend, BACKENDS)
        require_choice("repeat_mode", self.repeat_mode, REPEAT_MODES)
        for name in ("batch_size", "nproc_per_node", "timed_steps", "repeats", "timeout_s"):
            require_min(name, getattr(self, name), 1)
        for name in ("skip_steps", "warmup_steps", "num_workers"):
            require_min(name, getattr(self, name), 0)
        require_min("image_size", self.image_size, 32)

    @property
    def steps(self) -> int:
        return self.skip_steps + self.warmup_steps + self.timed_steps
