"""`benchlib fp8-layers`' parameters: float8 training's per-layer table at a model's own
shapes (benchlib.trainers.fp8_layers; notebook 50's FP8 section)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.choices import FP8_RECIPES, MADE_ON_DEVICE, dataset_kind
from benchlib.config.model_data import OwnDataConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class Fp8LayersConfig(OwnDataConfig):
    """Each distinct linear shape of the model at `batch_size` samples a step (seq_len
    tokens each for a language model), timed as nn.Linear in bf16 against torchao's
    Float8Linear in the recipe: forward and both backward GEMMs, compiled. The model and
    its data's shape are benchlib.config.model_data's (any model a training study trains);
    the data is made on the device, since only its shape matters here."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"precision": tuple(FP8_RECIPES)}
    defaults: ClassVar[dict[str, Any]] = {"model": "gpt2-124m", "dataset": "tokens"}

    batch_size: int = 8
    """Samples a step on one device (the training row's per-device batch)."""
    precision: str = "fp8_tensorwise"
    """The recipe timed: fp8_tensorwise, fp8_rowwise or fp8_rowwise_gw_hp."""
    compile: bool = True
    """Time each side compiled (torch.compile), as float8 training runs; --no-compile on a
    CPU, where it only slows the table down."""
    rounds: int = 10
    """Rounds of bf16 and FP8 in turn; each one value of a side (5 or more: an interval)."""
    iters: int = 20
    """Steps timed in each round, after as many of warm-up the first time."""

    def validate(self) -> None:
        super().validate()
        if self.dataset not in MADE_ON_DEVICE and dataset_kind(self.dataset) != "entry":
            raise ConfigError("dataset", f"{self.dataset!r}: the table needs the data's shape "
                              f"only; use {' or '.join(MADE_ON_DEVICE)} (or your own)")
        for name in ("batch_size", "rounds", "iters"):
            require_min(name, getattr(self, name), 1)
