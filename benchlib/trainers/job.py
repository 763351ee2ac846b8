"""A training job as the trainers run it (benchlib.trainers.ddp and lightning): its model,
its data and what it learns from, built from the training fields (benchlib.config.training)
whatever their source: a seed's model and data set by name, the user's own by entry point
(`pkg.module:function`), a timm or transformers model from its config, or synthetic data
of a declared shape (images, or token ids for a language model).

A study's preflight builds the same job on the CPU and takes one training step on a
batch of 2 (`check`), so bad input ends there, one line and exit 2, before any rank starts.
A data set of the user's is read for that batch from an instance of its own in a process
of its own (benchlib.trainers.probe), never from the one the DataLoader's workers use.
"""

from __future__ import annotations

import argparse
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset, default_collate

from benchlib.config.choices import (
    GPT_MODELS,
    MADE_ON_DEVICE,
    TOKEN_DATASETS,
    dataset_kind,
    is_shards,
    model_kind,
)
from benchlib.core import entrypoints, gpt, memory
from benchlib.core.loops import Objective
from benchlib.core.models import build_model, describe_model, training_flops
from benchlib.data import storage, tokenfile, transforms
from benchlib.errors import ConfigError
from benchlib.trainers import probe
from benchlib.trainers.probe import item


class SyntheticBatches:
    """One batch made once on the device, handed out `steps` times: no IO, no decode, no
    copy (the compute-only limit, like NVIDIA DLE's synthetic mode)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, steps: int):
        self.x, self.y, self.steps = x, y, steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        return iter([(self.x, self.y)] * self.steps)


def parse_shape(text: str) -> tuple[int, ...]:
    """"3x32x32" -> (3, 32, 32)."""
    if not re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", text):
        raise ConfigError("input_shape", f"{text!r} is not a shape: write CxHxW, e.g. 3x32x32")
    return tuple(int(n) for n in text.split("x"))


def build_dataset(name: str, path: str, augment: bool = True, image_size: int = 224,
                  collate: str = "") -> tuple[Dataset, Any, tuple]:
    """(dataset, collate_fn, input shape): a prepared data set with benchlib.data.transforms'
    training transforms (their evaluation ones when not `augment`), or the map-style data
    set `pkg.module:function` returns, batched by `collate` (default_collate when empty)."""
    dataset, fn, shape, _ = _dataset(name, path, augment, image_size, collate)
    return dataset, fn, shape


def _dataset(name: str, path: str, augment: bool, image_size: int, collate: str, seed: int = 0,
             batch: int = 32) -> tuple[Dataset, Any, tuple, probe.Probe | None]:
    """build_dataset's, and for the user's own data set its probe (read apart); shards
    (`FORMAT:LOCATION`, benchlib.shards.for_training) read by their library, this rank's share."""
    from benchlib.data import datasets

    if is_shards(name):
        from benchlib.shards import for_training

        dataset, (x, y, largest) = for_training.dataset(name, seed, batch)
        return dataset, default_collate, tuple(x.shape[1:]), probe.Probe(x, y, largest, None)
    if dataset_kind(name) == "entry":
        dataset, fn, read = _own_dataset(name, collate)
        return dataset, fn, tuple(read.x.shape[1:]), read
    if name == "imagefolder":
        return (datasets.imagefolder(path, "train", transforms.imagefolder(image_size, augment)),
                default_collate, (3, image_size, image_size), None)
    if name == "cifar10":
        return (datasets.cifar10(path, train=True, transform=transforms.cifar10(augment)),
                default_collate, (3, 32, 32), None)
    prepared = storage.prepare(name, "raw", path)
    return prepared.dataset, prepared.collate_fn, (1, 28, 28), None


def _own_dataset(name: str, collate: str) -> tuple[Dataset, Any, probe.Probe]:
    """The user's data set, built here and not read: its first items are read by a probe
    (benchlib.trainers.probe) from an instance of its own, in a process of its own."""
    fn = entrypoints.load("dataset", name)
    dataset = entrypoints.call("dataset", name, fn, {})
    if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
        raise ConfigError("dataset", f"{name!r} returned a {type(dataset).__name__}, not a "
                          "map-style torch.utils.data.Dataset (with __getitem__ and __len__)")
    if len(dataset) < 2:
        raise ConfigError("dataset", f"{name!r} has {len(dataset)} items; a training step "
                          "needs at least 2")
    batch = entrypoints.load("collate", collate) if collate else default_collate
    read = probe.apart(lambda: entrypoints.call("dataset", name, fn, {}), name, batch,
                       checked=not collate)
    return dataset, batch, read


@dataclass
class Job:
    """What one rank trains. `dataset` None: synthetic batches made on the device."""

    model: nn.Module
    dataset: Dataset | None
    collate: Any
    shape: tuple[int, ...]  # one input's shape; token data: (seq_len,)
    num_classes: int
    vocab_size: int  # token data when > 0
    objective: Objective
    described: dict[str, Any] = field(default_factory=dict)
    own: bool = False  # a model, data set or loss of the user's: `check` it before training
    rss_before_model: int | None = None  # the process's RSS with the data, before the model
    data_name: str = ""  # the data set's name, for an item's error
    # a data set of the user's: what its own instance gave in a process of its own
    # (benchlib.trainers.probe); benchlib's data sets keep no state per process: read here
    probe: probe.Probe | None = None

    def batch(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """n samples on the CPU: random ones of the declared shape, or the data set's first
        (its items again from the start where it has fewer than n), read in this process
        (a worker with no DataLoader workers: batch_trial's steps)."""
        g = torch.Generator().manual_seed(seed)
        if isinstance(self.dataset, IterableDataset):  # shards: the first n this rank reads
            items = list(itertools.islice(iter(self.dataset), n))
            return self.collate([items[i % len(items)] for i in range(n)])
        if self.dataset is not None:
            return self.collate([item(self.dataset, i % len(self.dataset), self.data_name)
                                 for i in range(n)])
        if self.vocab_size:
            x = torch.randint(0, self.vocab_size, (n, *self.shape), generator=g)
            return x, torch.randint(0, self.vocab_size, (n, *self.shape), generator=g)
        return (torch.rand(n, *self.shape, generator=g),
                torch.randint(0, self.num_classes, (n,), generator=g))

    def sample(self, seed: int = 0) -> tuple[Any, Any]:
        """A batch of 2 on the CPU for the model check, the FLOP count and the compile's
        figures: a data set of the user's gives its probe's, read apart, so the instance
        the DataLoader's workers fork with is never read before them."""
        if self.probe is not None:
            return self.probe.x, self.probe.y
        return self.batch(2, seed)

    def synthetic(self, batch: int, steps: int, device: torch.device, seed: int) -> SyntheticBatches:
        x, y = self.batch(batch, seed)
        return SyntheticBatches(x.to(device), y.to(device), steps)

    def flops_per_sample(self) -> float:
        """FLOPs of one training step (forward and backward) per sample, counted on a batch
        of 2 (benchlib.core.models.training_flops)."""
        x, y = self.sample()
        return training_flops(self.model, x, y, self.objective)

    def flop_figures(self) -> dict[str, float]:
        """flops_per_sample (counted); for token data also per token, and where the model
        has an analytic count (benchlib.core.gpt), the two counts' ratio."""
        counted = self.flops_per_sample()
        figures = {"flops_per_sample": counted}
        if self.vocab_size:
            figures["flops_per_token"] = counted / self.shape[0]
            analytic = self.described.get("flops_per_token_analytic")
            if analytic:
                figures["flop_count_ratio"] = figures["flops_per_token"] / analytic
        return figures

    def largest_label(self, items: int = 256) -> int:
        """The largest label among a data set's first `items` (a class label per item)."""
        if self.dataset is None:
            return self.num_classes - 1 if not self.vocab_size else self.vocab_size - 1
        if self.probe is not None:
            return self.probe.largest_label
        labels = [item(self.dataset, i, self.data_name)
                  for i in range(min(len(self.dataset), items))]
        labels = [item[1] for item in labels if isinstance(item, (tuple, list)) and len(item) == 2]
        return max((int(torch.as_tensor(v).max()) for v in labels), default=0)

    def check(self, name: str) -> None:
        """One training step's forward and loss on a batch of 2 on the CPU: a model whose
        output does not fit the data's labels is refused here, naming `model`."""
        x, y = self.sample()
        try:
            out = self.model(x, labels=y) if self.objective.labels_kw else self.model(x)
            logits = getattr(out, "logits", out)
            if self.objective.loss is None and getattr(out, "loss", None) is None \
                    and isinstance(logits, torch.Tensor) and not y.is_floating_point():
                top = max(int(y.max()), self.largest_label())
                if logits.dim() < 1 or logits.shape[-1] <= top:
                    raise ConfigError("model", f"{name!r} gives {tuple(logits.shape)} outputs for "
                                      f"a batch of 2, but the data's labels go up to {top}: "
                                      "it needs more outputs per sample (or give a loss)")
            self.objective(lambda *a, **k: out, x, y).backward()
        except ConfigError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's model on the data
            raise ConfigError("model", f"{name!r} does not train on this data (input "
                              f"{tuple(x.shape)}, labels {tuple(y.shape)}): "
                              f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
        finally:
            self.model.zero_grad(set_to_none=True)


def build_job(args: argparse.Namespace | Any) -> Job:
    """The job the training fields describe (a worker's parsed flags or a study config)."""
    image_size = getattr(args, "image_size", 224)
    augment = getattr(args, "augment", True)  # a study config: on
    tokens = args.seq_len > 0 or args.dataset in TOKEN_DATASETS
    seq_len, vocab = args.seq_len, args.vocab_size
    if args.dataset in TOKEN_DATASETS and args.model in GPT_MODELS:  # the model's own, unless given
        sized = gpt.config(args.model, args.model_args)
        seq_len, vocab = seq_len or sized.block_size, vocab or sized.vocab_size
    dataset = collate = read = None
    if tokens:
        shape = (seq_len,)
    elif args.input_shape:
        shape = parse_shape(args.input_shape)
    else:
        shape = (3, image_size, image_size)
    if args.dataset == "tokenfile":  # nanoGPT's train.bin, its ids checked against the model
        info = tokenfile.meta(args.path)
        vocab = model_vocab(args, info["vocab_size"])
        tokenfile.check_fits(info, seq_len, args.model, vocab)
        vocab = vocab or info["vocab_size"]
        dataset, collate = tokenfile.TokenWindows(args.path, seq_len), default_collate
    elif args.dataset not in MADE_ON_DEVICE:
        dataset, collate, shape, read = _dataset(args.dataset, args.path, augment, image_size,
                                                 args.collate, getattr(args, "seed", 0),
                                                 getattr(args, "batch_size", 32))
        x = read.x if read is not None else \
            collate([item(dataset, 0, args.dataset), item(dataset, 1, args.dataset)])[0]
        tokens = tokens or (not torch.is_floating_point(x) and x.dim() == 2)  # (batch, ids)
    if tokens and not vocab and read is not None and read.largest_id is not None:
        vocab = read.largest_id + 1
    elif tokens and not vocab and dataset is not None:
        vocab = int(collate([item(dataset, i, args.dataset)
                             for i in range(min(len(dataset), probe.IDS_READ))])[0].max()) + 1
    before_model = memory.rss_bytes()  # the model's own bytes on the CPU are above this
    model = build_model(args.model, shape, args.depth, args.alpha, model_args=args.model_args,
                        num_classes=args.num_classes, tokens=tokens, vocab_size=vocab)
    loss = entrypoints.load("loss", args.loss) if args.loss else None
    objective = Objective(loss, labels_kw=model_kind(args.model) == "hf")
    described = describe_model(args.model, model, args.model_args)  # class, parameters, identity
    if tokens:  # a language model: its tokens/s is samples/s times this
        described["tokens_per_sample"] = shape[0]
    if isinstance(model, gpt.GPT):  # 6N + 12·L·H·Q·T, beside PyTorch's count (flop_figures)
        described["flops_per_token_analytic"] = gpt.flops_per_token(model, shape[0])
    return Job(model, dataset, collate, shape, args.num_classes, vocab if tokens else 0,
               objective, described, own=uses_own_code(args), rss_before_model=before_model,
               data_name=args.dataset, probe=read)


def model_vocab(args: argparse.Namespace | Any, data_vocab: int) -> int | None:
    """The vocabulary the model will have for token data declaring `data_vocab` ids: a
    GPT's own (or model_args'), an hf model's model_args vocab_size, else the data's; None
    for a model of the user's, which says nothing of it before it is built."""
    if args.model in GPT_MODELS:
        return gpt.config(args.model, args.model_args).vocab_size
    if model_kind(args.model) == "hf":
        return int(args.model_args.get("vocab_size", data_vocab))
    return None


def uses_own_code(args: argparse.Namespace | Any) -> bool:
    """A model, data set or loss of the user's (an entry point, timm: or hf:), or synthetic
    data of a declared shape: what `Job.check` is for."""
    return (model_kind(args.model) != "builtin" or dataset_kind(args.dataset) == "entry"
            or bool(args.loss or args.input_shape or args.seq_len))
