"""The memory_and_batch study's parameters (notebook 15_memory_and_batch and
`python -m benchlib maxbatch`): the largest per-device batch that trains, confirmed, and
the throughput of every batch tried on the way."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.choices import DATASET_FORMS, dataset_kind
from benchlib.config.model_data import OwnDataConfig
from benchlib.config.performance import PerformanceConfig
from benchlib.errors import ConfigError

# the input each prepared data set's images have: the trials make batches of that shape on
# the device (no files are read: the search measures memory, not IO); imagefolder's side is
# image_size. synthetic images are input_shape, 3x32x32 when not given; tokens, ids of the
# model's sequence (seq_len, vocab_size); a data set of your own gives its own items
INPUT_SHAPES: dict[str, tuple[int, int, int]] = {
    "cifar10": (3, 32, 32), "fashion-mnist": (1, 28, 28), "mydataset": (1, 28, 28)}
SYNTHETIC_SHAPE = (3, 32, 32)
DATASETS = ("synthetic", "tokens", *INPUT_SHAPES, "imagefolder")

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


# the fields a batch trial (benchlib.workers.batch_trial) takes, its flags generated from them:
# the model and data, the performance settings, the steps of one trial
TRIAL_FIELDS = (*(f.name for f in dataclasses.fields(OwnDataConfig)),
                *(f.name for f in dataclasses.fields(PerformanceConfig)),
                "steps", "warmup_steps", "lr")


def batch_data(dataset: str, input_shape: str, image_size: int, seq_len: int) -> tuple[str, str]:
    """(dataset, input_shape) the trial builds its batches from: a prepared data set of
    images as synthetic images of its shape (no file is read), synthetic images as
    input_shape (3x32x32 when not given); tokens, a data set of your own, synthetic tokens
    as they are. Pure: the study and the worker call it alike."""
    if dataset in INPUT_SHAPES:
        return "synthetic", "x".join(map(str, INPUT_SHAPES[dataset]))
    if dataset == "imagefolder":
        return "synthetic", f"3x{image_size}x{image_size}"
    if dataset == "synthetic" and not input_shape and not seq_len:
        return "synthetic", "x".join(map(str, SYNTHETIC_SHAPE))
    return dataset, input_shape


def job_fields(values: Any) -> dict[str, Any]:
    """What a trial's job is built from (benchlib.trainers.job.build_job): the model and
    data fields of `values` (a config, or a worker's parsed flags), the data as batch_data
    makes it, no path (no file is read), one process."""
    fields = {name: getattr(values, name) for name in TRIAL_FIELDS if hasattr(values, name)}
    dataset, shape = batch_data(values.dataset, values.input_shape, values.image_size,
                                values.seq_len)
    return {**fields, "dataset": dataset, "input_shape": shape, "path": "", "strategy": "single"}


@dataclasses.dataclass
class MemoryAndBatchConfig(PerformanceConfig, OwnDataConfig):
    """The largest batch that trains (notebook 15, `python -m benchlib maxbatch`): real
    training steps in a fresh process per batch; each batch tried chosen from the peaks
    measured so far; the largest that fits and the first that does not each confirmed by
    `confirm` fresh processes. The model and data are the training studies' (benchlib.
    config.model_data: built in, pkg.module:function with model_args, timm:NAME, hf:NAME;
    a data set of your own with its collate, or synthetic images or tokens of a declared
    shape), and so are the performance settings (benchlib.config.performance: precision,
    channels_last, compile, activation checkpointing): the memory of an amp_bf16,
    channels_last ResNet-50 is not fp32's."""

    defaults: ClassVar[dict[str, Any]] = {"model": "simplecnn", "dataset": "synthetic"}

    memory_limit: str = ""
    """A batch does not fit when its peak (RSS on CPU, reserved on CUDA) passes this:
    4GiB, 512MiB, 2GB; empty for none (CUDA's own memory is the limit; the CPU needs one)."""
    start_batch: int = 1
    """The first batch tried; the next ones are chosen from the peaks measured."""
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
    confirm: int = 3
    """Fresh processes that must all fit at the largest batch that fits, and all fail at
    the first that does not (at least 3: one trial is a guess)."""

    def batch_shape(self) -> tuple[int, ...]:
        """The shape of one sample the trials make: the data set's images, synthetic's
        input_shape; () for tokens and data of your own (their items say)."""
        dataset, shape = batch_data(self.dataset, self.input_shape, self.image_size,
                                    self.seq_len)
        return tuple(int(n) for n in shape.split("x")) if dataset == "synthetic" and shape \
            else ()

    def memory_limit_bytes(self) -> int | None:
        return parse_size(self.memory_limit)

    def validate(self) -> None:
        if self.dataset not in DATASETS and dataset_kind(self.dataset) != "entry":
            why = (": the search measures memory, not IO; give tokens (ids made on the device "
                   "with the model's seq_len and vocab_size)" if self.dataset == "tokenfile"
                   else "")
            raise ConfigError("dataset", f"{self.dataset!r} is not one of {', '.join(DATASETS)}, "
                              f"nor {DATASET_FORMS}{why}")
        super().validate()
        self.memory_limit_bytes()
        require_min("start_batch", self.start_batch, 1)
        require_min("max_batch", self.max_batch, self.start_batch)
        require_min("confirm", self.confirm, 3)
        require_min("warmup_steps", self.warmup_steps, 0)
        if self.steps <= self.warmup_steps:
            raise ConfigError("steps", f"{self.steps} leaves no timed step after "
                              f"{self.warmup_steps} warm-up step(s); raise steps")
        require_min("timeout_s", self.timeout_s, 1)
        if self.lr <= 0:
            raise ConfigError("lr", f"must be > 0, got {self.lr}")
