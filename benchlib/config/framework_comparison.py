"""The framework_comparison study's parameters (notebook 40_framework_comparison)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from benchlib.config.base import StudyConfig, require_choice, require_min
from benchlib.config.choices import (
    ARCHS,
    BACKENDS,
    DATASET_FORMS,
    DEVICES,
    FRAMEWORK_DATASETS,
    LAUNCHERS,
    MODEL_FORMS,
    PRECISIONS,
    REPEAT_MODES,
    dataset_kind,
    model_kind,
)
from benchlib.errors import ConfigError


@dataclasses.dataclass
class FrameworkComparisonConfig(StudyConfig):
    """ResNet throughput measured the DLPerf way (notebook 40, seed 003): skip the first
    `skip_steps`, warm up `warmup_steps` more, average the next `timed_steps`."""

    study: ClassVar[str] = "framework_comparison"

    arch: str = "resnet50"
    """resnet50 (seed 003: ResNet-50 v1.5, torchvision's) or resnet18; or a model of your
    own, pkg.module:function, timm:NAME or hf:NAME (built from its config, no download)."""
    model_args: dict = dataclasses.field(default_factory=dict)
    """Keyword arguments of your model function, or a timm or hf model's config overrides."""
    dataset: str = "synthetic"
    """synthetic (one batch made on the device: compute only), imagefolder (JPEGs), or your
    own: pkg.module:function returning a map-style torch Dataset of (input, label)."""
    seq_len: int = 0
    """synthetic tokens for a language model (hf:NAME): ids per sample (0: images)."""
    vocab_size: int = 0
    """synthetic tokens: ids are 0..vocab_size-1."""
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
        kind = model_kind(self.arch)
        if kind is None or (kind == "builtin" and self.arch not in ARCHS):
            raise ConfigError("arch", f"{self.arch!r} is not one of {', '.join(ARCHS)}, nor "
                              f"{MODEL_FORMS}")
        if self.dataset not in FRAMEWORK_DATASETS and dataset_kind(self.dataset) != "entry":
            raise ConfigError("dataset", f"{self.dataset!r} is not one of "
                              f"{', '.join(FRAMEWORK_DATASETS)}, nor {DATASET_FORMS}")
        if self.model_args and kind == "builtin":
            raise ConfigError("model_args", f"{self.arch} is built in and takes none; "
                              f"model_args are for {MODEL_FORMS}")
        for name in ("seq_len", "vocab_size"):
            require_min(name, getattr(self, name), 0)
        if bool(self.seq_len) != bool(self.vocab_size) or (self.seq_len and self.dataset != "synthetic"):
            raise ConfigError("seq_len", "synthetic tokens need dataset synthetic, seq_len and "
                              "vocab_size (>= 1)")
        if kind == "hf" and not self.seq_len and dataset_kind(self.dataset) != "entry":
            raise ConfigError("arch", f"{self.arch} is a language model: give it tokens "
                              "(seq_len and vocab_size, or your own data)")
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
