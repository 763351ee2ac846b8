"""The parameters every training study shares, declared once: what its worker trains with
(`TrainingConfig`) and how often the study launches it (`RepeatsConfig`). A study's
config builds on them (dp_vs_ddp, multinode_lightning), so a notebook's parameters cell
stays flat; the training workers generate their flags from the same fields
(benchlib.config.flags) and the studies hand them the fields by name (`training_params`).

A field added here reaches every training study, its notebook's parameters, each
worker's flags and the run.json a study writes for it."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_counts, require_min
from benchlib.config.choices import (
    BACKENDS,
    DATASET_FORMS,
    DEVICES,
    GPT_MODELS,
    GRAY_28,
    MADE_ON_DEVICE,
    MODEL_FORMS,
    MODELS,
    REPEAT_MODES,
    TOKEN_DATASETS,
    TRAIN_DATASETS,
    dataset_kind,
    is_entry_point,
    model_kind,
)
from benchlib.errors import ConfigError


@dataclasses.dataclass
class RepeatsConfig(StudyConfig):
    """How a study samples a run's spread: the study's, not the worker's."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"repeat_mode": REPEAT_MODES}

    repeats: int = 1
    """Launches of the whole run, each with fresh processes."""
    repeat_mode: str = "epoch"
    """One sample of the spread: epoch (every epoch of every launch) or process (each
    launch, its median over its epochs: the spread includes start-up and placement)."""

    def validate(self) -> None:
        super().validate()
        require_min("repeats", self.repeats, 1)


@dataclasses.dataclass
class TrainingConfig(StudyConfig):
    """What a training worker (benchlib.workers.single, dp, ddp, lightning, elastic)
    trains with. The defaults are seed 002's; a study sets its own in its `defaults`."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"device": DEVICES, "backend": BACKENDS}

    dataset: str = "cifar10"
    """The data set: one prepared by `benchlib data` (fashion-mnist, mydataset, cifar10,
    imagefolder; tokenfile: token ids for a language model), one made without files where the
    study allows it (synthetic: one batch made on the device, no IO, of input_shape or
    seq_len; tokens: token ids made on the device; dummy: random images), or your own:
    pkg.module:function returning a map-style torch Dataset of (input, label)."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`, the same on every node."""
    model: str = "pyramidnet"
    """pyramidnet (seed 002), simplecnn, toynet (28x28 data only), resnet18 or resnet50; or
    pkg.module:function returning an nn.Module, timm:NAME, or hf:NAME (a transformers model
    type or a local config.json), built from its config: no weights are downloaded."""
    model_args: dict = dataclasses.field(default_factory=dict)
    """Keyword arguments of your model function, or a timm or hf model's config overrides
    (on the command line: JSON, --model-args '{"width": 64}')."""
    loss: str = ""
    """pkg.module:function(output, labels) returning the loss; empty: the model's own .loss
    (transformers), else cross-entropy."""
    collate: str = ""
    """pkg.module:function that batches your data set's items; empty: default_collate."""
    input_shape: str = ""
    """synthetic: one input's shape, CxHxW (3x32x32); empty: 3 x image_size x image_size."""
    num_classes: int = 10
    """synthetic: labels 0..num_classes-1; a timm model gets this many outputs."""
    seq_len: int = 0
    """tokens per sample, for a language model: synthetic tokens, or tokenfile's windows
    (0: images; dataset tokens or tokenfile with benchlib's GPT: its block size)."""
    vocab_size: int = 0
    """synthetic tokens: ids are 0..vocab_size-1."""
    depth: int = 20
    """PyramidNet depth, 6n + 2 (the paper's CIFAR setting: 110)."""
    alpha: int = 48
    """PyramidNet widening (the paper's CIFAR setting: 270)."""
    epochs: int = 1
    """Epochs per launch."""
    batch_size: int = 32
    """Per device (seed 000: 32, seed 002: 64)."""
    num_workers: int = 0
    """DataLoader workers per rank."""
    warmup_steps: int = 3
    """Steps left out at the start of every epoch."""
    max_steps: int = 0
    """Steps per epoch; 0 runs whole epochs."""
    lr: float = 0.1
    """SGD learning rate (momentum 0.9)."""
    device: str = "auto"
    """cpu, gpu or auto."""
    backend: str = "auto"
    """auto (nccl on CUDA, gloo on CPU), gloo or nccl."""
    timeout_s: int = 600
    """The whole launch, and each rendezvous and collective, time out after this."""
    seed: int = 0
    """Seed of weights, shuffling and augmentation."""

    def validate(self) -> None:
        super().validate()
        # a study that names its data sets (`allowed`) has checked them already
        check_own_code(self, any_dataset="dataset" not in self.allowed_values())
        if self.model == "pyramidnet" and (self.depth - 2) % 6:
            raise ConfigError("depth", f"PyramidNet depth must be 6n + 2 (20, 32, 110), got "
                              f"{self.depth}")
        if self.model == "toynet" and self.dataset not in (*GRAY_28, "dummy"):  # any shape
            raise ConfigError("model", "toynet takes 1x28x28 inputs: use fashion-mnist or "
                              "mydataset, or simplecnn / pyramidnet")
        if self.model.startswith("resnet") and self.dataset in GRAY_28:
            raise ConfigError("model", f"{self.model} takes 3-channel images: use cifar10, "
                              "imagefolder or synthetic, or toynet / simplecnn / pyramidnet")
        require_counts(self, ("epochs", "batch_size", "timeout_s"))

    def training_params(self) -> dict[str, Any]:
        """The training fields and their values, by name: what the worker takes."""
        return {name: getattr(self, name) for name in training_fields(type(self))}


def check_own_code(values: Any, any_dataset: bool = True) -> None:
    """The model and data set named as benchlib knows them (`any_dataset`: the training
    data sets or one of the user's own), and the fields that describe a model, data set or
    loss of the user's own: entry points written as such, shapes and counts that can be,
    each only where it means something. A config's fields or a worker's parsed flags."""
    if model_kind(values.model) is None:
        raise ConfigError("model", f"{values.model!r} is not one of {', '.join(MODELS)}, "
                          f"nor {MODEL_FORMS}")
    if any_dataset and dataset_kind(values.dataset) is None:
        raise ConfigError("dataset", f"{values.dataset!r} is not one of "
                          f"{', '.join(TRAIN_DATASETS)}, nor {DATASET_FORMS}")
    for name in ("loss", "collate"):
        value = getattr(values, name)
        if value and not is_entry_point(value):
            raise ConfigError(name, f"{value!r} is not an entry point: write pkg.module:function")
    if values.collate and dataset_kind(values.dataset) != "entry":
        raise ConfigError("collate", f"only a data set of your own (pkg.module:function) takes "
                          f"a collate function, not {values.dataset}")
    language_model = values.model in GPT_MODELS or model_kind(values.model) == "hf"
    if values.model_args and model_kind(values.model) == "builtin" \
            and values.model not in GPT_MODELS:
        raise ConfigError("model_args", f"{values.model} is built in and takes none (its "
                          f"settings are depth and alpha); model_args are for {MODEL_FORMS} "
                          f"and {', '.join(GPT_MODELS)}")
    if values.input_shape and not re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", values.input_shape):
        raise ConfigError("input_shape", f"{values.input_shape!r} is not a shape: write CxHxW, "
                          "e.g. 3x32x32")
    for name in ("num_classes", "seq_len", "vocab_size"):
        require_min(name, getattr(values, name), 1 if name == "num_classes" else 0)
    for name in ("seq_len", "vocab_size", "input_shape"):  # the shape of data made here
        made_here = values.dataset in MADE_ON_DEVICE or (name == "seq_len" and
                                                          values.dataset == "tokenfile")
        if getattr(values, name) and not made_here:
            raise ConfigError(name, f"declares synthetic data's shape; dataset is "
                              f"{values.dataset}, whose items have their own")
    if values.dataset == "synthetic" and bool(values.seq_len) != bool(values.vocab_size):
        raise ConfigError("vocab_size" if values.seq_len else "seq_len",
                          "synthetic tokens need both seq_len and vocab_size (>= 1); or use "
                          "dataset tokens, which takes the model's")
    token_data = values.dataset in TOKEN_DATASETS
    if values.input_shape and (values.seq_len or token_data):
        raise ConfigError("input_shape", "token data (seq_len, dataset tokens or tokenfile) "
                          "has no input_shape: give one of the two")
    tokens = token_data or bool(values.seq_len)
    if token_data and not language_model and model_kind(values.model) != "entry":
        what = "tokens" if values.dataset == "tokens" else "tokenfile's ids"
        raise ConfigError("dataset", f"{what} feed a language model "
                          f"({', '.join(GPT_MODELS)}, hf:NAME or your own), not {values.model}")
    if values.dataset == "tokens" and values.model not in GPT_MODELS \
            and not (values.seq_len and values.vocab_size):
        raise ConfigError("seq_len" if not values.seq_len else "vocab_size",
                          f"{values.model} needs seq_len and vocab_size for its token data "
                          f"(only {', '.join(GPT_MODELS)} bring their own)")
    if values.dataset == "tokenfile" and values.model not in GPT_MODELS and not values.seq_len:
        raise ConfigError("seq_len", f"{values.model} needs seq_len for its windows of the "
                          f"tokenfile (only {', '.join(GPT_MODELS)} bring their own)")
    if language_model and not tokens and dataset_kind(values.dataset) != "entry":
        raise ConfigError("model", f"{values.model} is a language model: give it tokens "
                          "(dataset tokens or tokenfile, or synthetic with seq_len and "
                          "vocab_size, or your own data)")


def training_fields(cls: type) -> list[str]:
    """The fields of `cls` a training worker takes: those TrainingConfig declares, and
    those of any config that extends it without being a study (a class that sets `study`:
    its own fields say how to launch, not what to train)."""
    declared: set[str] = set()
    for klass in cls.__mro__:
        if issubclass(klass, TrainingConfig) and not vars(klass).get("study"):
            declared |= set(vars(klass).get("__annotations__", {}))
    return [f.name for f in dataclasses.fields(cls) if f.name in declared]
