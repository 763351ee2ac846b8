"""The single_device_io study's parameters (notebook 10_single_device_io and `python -m benchlib io`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from benchlib.config.base import StudyConfig, require_choice, require_min
from benchlib.config.choices import DEVICES, IO_DATASETS, IO_MODELS, MODES, VARIANTS, model_kind
from benchlib.errors import ConfigError


@dataclasses.dataclass
class SingleDeviceIoConfig(StudyConfig):
    """Single-device IO (notebook 10, `python -m benchlib io`): seed 000's singlegpu.py
    and test_funcs.py."""

    study: ClassVar[str] = "single_device_io"

    path: str = "outputs/data"
    """Folder prepared by `benchlib data`."""
    dataset: str = "fashion-mnist"
    """fashion-mnist or mydataset."""
    variant: str = "raw"
    """Storage variant: raw, preload, preload_batched, tensorclass, tensorclass_memmap, np_memmap."""
    mode: str = "train"
    """traverse (iterate and move batches) or train (the full step)."""
    device: str = "auto"
    """cpu, gpu (an error without CUDA) or auto."""
    model: str = "toynet"
    """What train mode trains on the 1x28x28 images (10 classes): toynet (seed 000's MLP),
    simplecnn or pyramidnet; or pkg.module:function returning an nn.Module, or timm:NAME
    (built from its config, no weights)."""
    model_args: dict = dataclasses.field(default_factory=dict)
    """Keyword arguments of your model function, or a timm model's config overrides
    (on the command line: JSON, --model-args '{"in_channels": 1}')."""
    epochs: int = 1
    """Epochs per repeat (seed 000: 5)."""
    batch_size: int = 64
    """Samples per step (seed 000: 64)."""
    num_workers: int = 0
    """DataLoader worker processes."""
    repeats: int = 3
    """Independent repeats, each with a fresh DataLoader (seed 000: 10)."""
    warmup_steps: int = 5
    """Steps at the start of every epoch left out of the step statistics."""
    lr: float = 1e-3
    """SGD learning rate (seed 000: 1e-3)."""
    profile: bool = False
    """Run extra steps under torch.profiler and show the top operators."""
    export_trace: bool = False
    """Write the profiled steps as a Chrome trace under outputs/traces/."""
    seed: int = 0
    """Seed of the model's weights and the shuffling."""

    def validate(self) -> None:
        require_choice("dataset", self.dataset, IO_DATASETS)
        require_choice("variant", self.variant, VARIANTS)
        require_choice("mode", self.mode, MODES)
        require_choice("device", self.device, DEVICES)
        if self.model not in IO_MODELS and model_kind(self.model) not in ("entry", "timm"):
            raise ConfigError("model", f"{self.model!r} is not one of {', '.join(IO_MODELS)}, "
                              "nor pkg.module:function or timm:NAME (1x28x28 inputs, 10 classes)")
        if self.model_args and self.model in IO_MODELS:
            raise ConfigError("model_args", f"{self.model} is built in and takes none; "
                              "model_args are for pkg.module:function and timm:NAME")
        require_min("epochs", self.epochs, 1)
        require_min("batch_size", self.batch_size, 1)
        require_min("num_workers", self.num_workers, 0)
        require_min("repeats", self.repeats, 1)
        require_min("warmup_steps", self.warmup_steps, 0)
        if self.lr <= 0:
            raise ConfigError("lr", f"must be > 0, got {self.lr}")
        if self.export_trace and not self.profile:
            raise ConfigError("export_trace", "needs profile = True (the trace is the profiled steps)")
