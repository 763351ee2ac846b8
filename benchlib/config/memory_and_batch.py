"""The memory_and_batch study's parameters (notebook 15_memory_and_batch and
`python -m benchlib maxbatch`): the largest per-device batch that trains, and the
throughput of every batch tried on the way."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.choices import GPT_MODELS, GRAY_28, MODELS, model_kind
from benchlib.config.model_data import ModelDataConfig
from benchlib.errors import ConfigError

# the input each data set's images have; the trials make batches of that shape on the
# device (no files are read: the search measures memory, not IO)
INPUT_SHAPES: dict[str, tuple[int, int, int]] = {
    "synthetic": (3, 32, 32), "cifar10": (3, 32, 32), "fashion-mnist": (1, 28, 28),
    "mydataset": (1, 28, 28), "imagefolder": (3, 224, 224)}
CLASSES = 10  # labels drawn below 10 (a 1000-class ResNet takes them as well)

_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
SIZE_FORMS = "a number and a unit: 4GiB, 512MiB, 2GB, 1.5TiB, 100000000B (KiB/MiB/GiB/TiB " \
             "are powers of 1024, kB/MB/GB/TB of 1000)"


def parse_size(text: str) -> int | None:
    """Bytes of `4GiB`, `512MiB`, `2GB`, `1.5TiB`, `100B`; None for "" (no limit).
    Anything else is a ConfigError naming memory_limit and the accepted forms."""
    if text.strip() == "":
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*", text)
    if not m or m.group(2).lower() not in _UNITS or float(m.group(1)) <= 0:
        raise ConfigError("memory_limit", f"{text!r} is not a size; give {SIZE_FORMS}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


IMAGE_MODELS = tuple(m for m in MODELS if m not in GPT_MODELS)  # a batch of images each
# the fields a batch trial (benchlib.workers.batch_trial) takes, its flags generated from them
TRIAL_FIELDS = ("model", "model_args", "depth", "alpha", "seed", "steps", "warmup_steps", "lr",
                "device")


@dataclasses.dataclass
class MemoryAndBatchConfig(ModelDataConfig):
    """The largest batch that trains (notebook 15, `python -m benchlib maxbatch`): real
    training steps in a fresh process per batch, doubling, then bisection. The model and
    data are the training studies' (benchlib.config.model_data): an image model, built in
    or your own, and the data set whose input shape the batches have."""

    study: ClassVar[str] = "memory_and_batch"
    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"dataset": tuple(INPUT_SHAPES)}
    defaults: ClassVar[dict[str, Any]] = {"model": "simplecnn", "dataset": "synthetic"}

    memory_limit: str = ""
    """A batch does not fit when its peak (RSS on CPU, reserved on CUDA) passes this:
    4GiB, 512MiB, 2GB; empty for none (CUDA's own memory is the limit; the CPU needs one)."""
    start_batch: int = 1
    """The first batch tried; doubled until one does not fit."""
    max_batch: int = 4096
    """The largest batch tried: the search stops there even when it fits."""
    steps: int = 4
    """Training steps per batch tried, the warm-up included."""
    warmup_steps: int = 1
    """Steps before throughput is timed (their memory counts)."""
    lr: float = 0.1
    """SGD learning rate (momentum 0.9, so the optimizer keeps a state per parameter)."""
    timeout_s: int = 300
    """Seconds for each batch tried."""

    def input_shape(self) -> tuple[int, int, int]:
        """The shape of one sample: the data set's, 1x28x28 for toynet on synthetic data."""
        if self.model == "toynet" and self.dataset == "synthetic":
            return 1, 28, 28
        return INPUT_SHAPES[self.dataset]

    def memory_limit_bytes(self) -> int | None:
        return parse_size(self.memory_limit)

    def validate(self) -> None:
        if model_kind(self.model) not in ("builtin", "entry", "timm") or self.model in GPT_MODELS:
            raise ConfigError("model", f"{self.model!r} is not one of {', '.join(IMAGE_MODELS)}, "
                              "nor pkg.module:function or timm:NAME (a model of images)")
        super().validate()
        self.memory_limit_bytes()
        require_min("start_batch", self.start_batch, 1)
        require_min("max_batch", self.max_batch, self.start_batch)
        require_min("warmup_steps", self.warmup_steps, 0)
        if self.steps <= self.warmup_steps:
            raise ConfigError("steps", f"{self.steps} leaves no timed step after "
                              f"{self.warmup_steps} warm-up step(s); raise steps")
        require_min("timeout_s", self.timeout_s, 1)
        if self.lr <= 0:
            raise ConfigError("lr", f"must be > 0, got {self.lr}")
        if self.model == "toynet" and self.input_shape() != (1, 28, 28):
            raise ConfigError("model", "toynet takes 1x28x28 inputs: use synthetic, "
                              "fashion-mnist or mydataset, or simplecnn / pyramidnet")
        if self.model.startswith("resnet") and self.dataset in GRAY_28:
            raise ConfigError("model", f"{self.model} takes 3-channel images: use synthetic, "
                              "cifar10 or imagefolder, or toynet / simplecnn / pyramidnet")
