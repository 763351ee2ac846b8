"""Model and data: what trains on what, on which device, from which seed. Declared once
here; every study that builds a model composes it (notebooks 10, 15, 40 and the training
studies through benchlib.config.training), and narrows its values where it takes fewer
(`allowed`, or its own `validate`).

`ModelDataConfig` is the part every such study shares; `OwnDataConfig` adds what a
model or data set of the user's own, or data made on the device, needs (a trainer's
studies: notebooks 20 to 50). `check_own_code` checks the same fields in a config or in
a worker's parsed flags."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_min
from benchlib.config.choices import (
    DATASET_FORMS,
    DEVICES,
    GPT_MODELS,
    GRAY_28,
    MADE_ON_DEVICE,
    MODEL_FORMS,
    MODELS,
    TOKEN_DATASETS,
    TRAIN_DATASETS,
    dataset_kind,
    is_entry_point,
    is_shards,
    model_kind,
)
from benchlib.errors import ConfigError


@dataclasses.dataclass
class ModelDataConfig(StudyConfig):
    """The model, the data set, the device and the seed. The defaults are seed 002's; a
    study sets its own in its `defaults`."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"device": DEVICES}

    model: str = "pyramidnet"
    """pyramidnet (seed 002), simplecnn, toynet (28x28 data only), resnet18 or resnet50; or
    pkg.module:function returning an nn.Module, timm:NAME, or hf:NAME (a transformers model
    type or a local config.json), built from its config: no weights are downloaded."""
    model_args: dict = dataclasses.field(default_factory=dict)
    """Keyword arguments of your model function, or a timm or hf model's config overrides
    (on the command line: JSON, --model-args '{"width": 64}')."""
    depth: int = 20
    """PyramidNet depth, 6n + 2 (the paper's CIFAR setting: 110)."""
    alpha: int = 48
    """PyramidNet widening (the paper's CIFAR setting: 270)."""
    dataset: str = "cifar10"
    """The data set: one prepared by `benchlib data` (fashion-mnist, mydataset, cifar10,
    imagefolder; tokenfile: token ids for a language model), one made without files where the
    study allows it (synthetic: one batch made on the device, no IO, of input_shape or
    seq_len; tokens: token ids made on the device; dummy: random images), or your own:
    pkg.module:function returning a map-style torch Dataset of (input, label), or shards
    written by `benchlib data --shards`: wds, litdata or mds:FOLDER or :s3://BUCKET/PREFIX."""
    device: str = "auto"
    """cpu, gpu (an error without CUDA) or auto."""
    seed: int = 0
    """Seed of weights, shuffling and augmentation."""

    def validate(self) -> None:
        super().validate()
        check_model(self)


def check_model(values: Any) -> None:
    """The model named as benchlib knows it, arguments only for a model that takes them, a
    PyramidNet depth it can build. A config's fields or a worker's parsed flags."""
    kind = model_kind(values.model)
    if kind is None:
        raise ConfigError("model", f"{values.model!r} is not one of {', '.join(MODELS)}, "
                          f"nor {MODEL_FORMS}")
    if values.model_args and kind == "builtin" and values.model not in GPT_MODELS:
        raise ConfigError("model_args", f"{values.model} is built in and takes none (its "
                          f"settings are depth and alpha); model_args are for {MODEL_FORMS} "
                          f"and {', '.join(GPT_MODELS)}")
    if values.model == "pyramidnet" and (values.depth - 2) % 6:
        raise ConfigError("depth", f"PyramidNet depth must be 6n + 2 (20, 32, 110), got "
                          f"{values.depth}")


@dataclasses.dataclass
class OwnDataConfig(ModelDataConfig):
    """What a model or data set of your own needs beside its name, and the shape of data
    made on the device (synthetic images or tokens)."""

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

    def validate(self) -> None:
        super().validate()
        # a study that names its data sets (`allowed`) has checked them already
        check_own_code(self, any_dataset="dataset" not in self.allowed_values())
        gray_synthetic = self.dataset == "synthetic" and self.input_shape == "1x28x28"
        if self.model == "toynet" and self.dataset not in (*GRAY_28, "dummy") \
                and not gray_synthetic and not is_shards(self.dataset):  # dummy: any shape
            raise ConfigError("model", "toynet takes 1x28x28 inputs: use fashion-mnist, "
                              "mydataset or synthetic with input_shape 1x28x28, or simplecnn "
                              "/ pyramidnet")
        if self.model.startswith("resnet") and self.dataset in GRAY_28:
            raise ConfigError("model", f"{self.model} takes 3-channel images: use cifar10, "
                              "imagefolder or synthetic, or toynet / simplecnn / pyramidnet")


def check_own_code(values: Any, any_dataset: bool = True) -> None:
    """The model and data set named as benchlib knows them (`any_dataset`: the training
    data sets or one of the user's own), and the fields that describe a model, data set or
    loss of the user's own: entry points written as such, shapes and counts that can be,
    each only where it means something. A config's fields or a worker's parsed flags."""
    check_model(values)
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
