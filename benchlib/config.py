"""Each study's parameters as a dataclass, checked when it is built.

A notebook's `parameters` cell holds plain values; the next cell turns them into one
of these (`cfg = DataPrepConfig.from_params(globals())`). A sweep builds the same
config for every row before anything runs, so bad input fails early with a message
that names the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from benchlib.errors import ConfigError

_TYPE_NAMES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}


def check_type(field: str, value: Any, type_name: str) -> None:
    """Check `value` against a parameter's annotation (`int`, `float`, `list[int]`, ...).

    An int is accepted where a float is expected; a bool is never taken for an int.
    Annotations this does not know are not checked.
    """
    base = type_name.split("[", 1)[0].strip()
    expected = _TYPE_NAMES.get(base)
    if expected is None:
        return
    ok = isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigError(field, f"expected {type_name}, got {type(value).__name__} {value!r}")


def require_choice(field: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(field, f"{value!r} is not one of {', '.join(map(str, allowed))}")


def require_min(field: str, value: float, minimum: float) -> None:
    if value < minimum:
        raise ConfigError(field, f"must be >= {minimum}, got {value}")


@dataclasses.dataclass
class StudyConfig:
    """Base of every study's config: type checks, then the study's own `validate`."""

    config_name: ClassVar[str] = "study"

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            hint = hints[f.name]
            type_name = getattr(hint, "__name__", str(hint))
            if typing.get_origin(hint) is not None:
                type_name = typing.get_origin(hint).__name__
            check_type(f.name, getattr(self, f.name), type_name)
        self.validate()

    def validate(self) -> None:
        """Range and choice checks; raise ConfigError naming the field."""

    def check_runtime(self) -> None:
        """Checks that need this machine (data present, device there); run before a run
        starts, never when a config is only built elsewhere (e.g. on a login node)."""

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]):
        """Build from a mapping that may hold more than the fields (a notebook's globals())."""
        return cls(**{name: params[name] for name in cls.field_names() if name in params})

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


DATASETS_PREPARED = ("fashion-mnist", "mydataset", "cifar10", "imagefolder")


@dataclasses.dataclass
class DataPrepConfig(StudyConfig):
    """Data preparation (notebook 00, `python -m benchlib data`)."""

    path: str = "outputs/data"
    """Folder the data sets are written to; relative paths start at the project root."""
    dataset: str = "all"
    """Which data set to prepare: all, fashion-mnist, mydataset, cifar10 or imagefolder."""
    size: int = 60000
    """MyDataSet sample count (seed 000's --size)."""
    fashion_size: int = 60000
    """FashionMNIST training images when generated offline (the test split gets a sixth)."""
    cifar_size: int = 50000
    """CIFAR-10 training images when generated offline (the test split gets a fifth)."""
    imagefolder_size: int = 1000
    """ImageNet-layout JPEGs generated (10 classes; val gets a tenth)."""
    offline: bool = False
    """Generate FashionMNIST and CIFAR-10 instead of downloading them (automatic without network)."""
    seed: int = 0
    """Seed of the generators: the same seed gives byte-identical files."""

    def validate(self) -> None:
        require_choice("dataset", self.dataset, ("all", *DATASETS_PREPARED))
        require_min("size", self.size, 1)
        require_min("fashion_size", self.fashion_size, 10)
        require_min("cifar_size", self.cifar_size, 10)
        require_min("imagefolder_size", self.imagefolder_size, 10)
        if not self.path:
            raise ConfigError("path", "must name a folder, e.g. outputs/data")

    def datasets(self) -> tuple[str, ...]:
        return DATASETS_PREPARED if self.dataset == "all" else (self.dataset,)


# The allowed values, in one place: the modules that implement them import these.
DEVICES = ("cpu", "gpu", "auto")
IO_DATASETS = ("fashion-mnist", "mydataset")
VARIANTS = ("raw", "preload", "preload_batched", "tensorclass", "tensorclass_memmap", "np_memmap")
MODES = ("traverse", "train")
MODELS = ("toynet", "simplecnn", "pyramidnet", "resnet18", "resnet50")
PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16")


def check_precision(precision: str, device_type: str) -> None:
    """Refuse a precision the device cannot run, before anything launches."""
    require_choice("precision", precision, PRECISIONS)
    if precision in ("tf32", "amp_fp16") and device_type != "cuda":
        raise ConfigError("precision", f"{precision} needs a CUDA GPU; on CPU use fp32 or amp_bf16")
    if precision in ("tf32", "amp_bf16") and device_type == "cuda":
        import torch

        if torch.cuda.get_device_capability()[0] < 8:
            raise ConfigError("precision", f"{precision} needs an Ampere or newer GPU "
                              f"(this one is sm_{''.join(map(str, torch.cuda.get_device_capability()))})")


def check_device(device: str) -> None:
    """`gpu` without CUDA is an error, never a silent fall back to the CPU."""
    if device == "gpu":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device", f"gpu asked for, but torch {torch.__version__} sees no "
                              "CUDA device; use cpu (or auto to take a GPU when there is one)")


@dataclasses.dataclass
class IOConfig(StudyConfig):
    """Single-device IO (notebook 10, `python -m benchlib io`): seed 000's singlegpu.py
    and test_funcs.py."""

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
    """toynet (seed 000's MLP), simplecnn or pyramidnet (1x28x28 inputs)."""
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
        require_choice("model", self.model, ("toynet", "simplecnn", "pyramidnet"))
        require_min("epochs", self.epochs, 1)
        require_min("batch_size", self.batch_size, 1)
        require_min("num_workers", self.num_workers, 0)
        require_min("repeats", self.repeats, 1)
        require_min("warmup_steps", self.warmup_steps, 0)
        if self.lr <= 0:
            raise ConfigError("lr", f"must be > 0, got {self.lr}")
        if self.export_trace and not self.profile:
            raise ConfigError("export_trace", "needs profile = True (the trace is the profiled steps)")

    def check_runtime(self) -> None:
        from benchlib import data

        check_device(self.device)
        data.describe(self.path, self.dataset)


STRATEGIES = ("single", "dp", "ddp")
GRAY_28 = ("fashion-mnist", "mydataset")  # 1x28x28 inputs
LAUNCHERS = ("torchrun", "mp_spawn", "tcp")
TRAIN_DATASETS = ("cifar10", "fashion-mnist", "mydataset", "synthetic", "imagefolder")


@dataclasses.dataclass
class DistConfig(StudyConfig):
    """DataParallel vs DDP (notebook 20): seed 002's single_gpu.py, data_parallel.py and
    distributed_data_parallel.py, launched as subprocesses."""

    strategy: str = "ddp"
    """single (one device), dp (DataParallel over `nproc_per_node` GPUs) or ddp."""
    launcher: str = "torchrun"
    """How DDP ranks start: torchrun, mp_spawn or tcp (one process per rank, tcp:// init)."""
    nproc_per_node: int = 2
    """ddp: ranks on this host; dp: the GPUs its one process spans; single: 1."""
    dataset: str = "cifar10"
    """cifar10, fashion-mnist, mydataset or synthetic (no IO)."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`."""
    model: str = "pyramidnet"
    """pyramidnet (seed 002), simplecnn or toynet (28x28 data only)."""
    depth: int = 20
    """PyramidNet depth, 6n + 2 (the paper's CIFAR setting: 110)."""
    alpha: int = 48
    """PyramidNet widening (the paper's CIFAR setting: 270)."""
    epochs: int = 1
    """Epochs; each is one sample of the spread."""
    batch_size: int = 32
    """Per device (seed 002: 64)."""
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
    allreduce: bool = False
    """Also measure all-reduce bus bandwidth with the same ranks."""
    allreduce_max_bytes: int = 16777216
    """Largest all-reduce message (16 MiB; a GPU node: 256 MiB and more)."""
    timeout_s: int = 600
    """The whole launch, and each rendezvous and collective, time out after this."""
    seed: int = 0
    """Seed of weights, shuffling and augmentation."""

    def validate(self) -> None:
        from benchlib.dist import BACKENDS

        require_choice("strategy", self.strategy, STRATEGIES)
        require_choice("launcher", self.launcher, LAUNCHERS)
        require_choice("backend", self.backend, BACKENDS)
        require_min("nproc_per_node", self.nproc_per_node, 1)
        if self.strategy == "single" and self.nproc_per_node != 1:
            raise ConfigError("nproc_per_node", "single runs one process on one device: set 1 "
                              "(dp: the GPUs its one process spans; ddp: ranks per node)")
        _check_training(self)
        require_min("allreduce_max_bytes", self.allreduce_max_bytes, 1024)

    def check_runtime(self) -> None:
        cuda = _check_device_and_backend(self.device, self.backend)
        _check_ranks_fit("nproc_per_node", self.nproc_per_node, cuda)
        # ddp: a batch per rank; dp: a batch per device its one process spans (GPUs only)
        per_step = self.batch_size * (self.nproc_per_node if self.strategy == "ddp" or cuda else 1)
        _check_steps(self, per_step)


def _check_training(cfg: Any) -> None:
    """The checks every trainer's config shares (DistConfig, MultinodeConfig)."""
    require_choice("dataset", cfg.dataset, TRAIN_DATASETS)
    require_choice("model", cfg.model, MODELS)
    require_choice("device", cfg.device, DEVICES)
    if cfg.model == "pyramidnet" and (cfg.depth - 2) % 6:
        raise ConfigError("depth", f"PyramidNet depth must be 6n + 2 (20, 32, 110), got {cfg.depth}")
    if cfg.model == "toynet" and cfg.dataset not in GRAY_28:
        raise ConfigError("model", "toynet takes 1x28x28 inputs: use fashion-mnist or "
                          "mydataset, or simplecnn / pyramidnet")
    if cfg.model.startswith("resnet") and cfg.dataset in GRAY_28:
        raise ConfigError("model", f"{cfg.model} takes 3-channel images: use cifar10, "
                          "imagefolder or synthetic, or toynet / simplecnn / pyramidnet")
    for name in ("epochs", "batch_size", "timeout_s"):
        require_min(name, getattr(cfg, name), 1)
    for name in ("num_workers", "warmup_steps", "max_steps"):
        require_min(name, getattr(cfg, name), 0)
    if cfg.max_steps and cfg.warmup_steps >= cfg.max_steps:
        raise ConfigError("warmup_steps", f"{cfg.warmup_steps} leaves no timed step of "
                          f"max_steps {cfg.max_steps}")


def _check_device_and_backend(device: str, backend: str) -> bool:
    """The device exists here and the backend suits it; True when that is CUDA."""
    import torch

    from benchlib.dist import choose_backend

    check_device(device)
    cuda = device == "gpu" or (device == "auto" and torch.cuda.is_available())
    choose_backend("cuda" if cuda else "cpu", backend)
    return cuda


def _check_ranks_fit(field: str, ranks: int, cuda: bool) -> None:
    """One rank per GPU, or per CPU core: more would share a device and measure that."""
    import os

    import torch

    visible = torch.cuda.device_count() if cuda else (os.cpu_count() or 1)
    if ranks > visible:
        what = "GPUs are visible" if cuda else "CPU cores are there (one rank each)"
        raise ConfigError(field, f"{ranks} ranks asked for on this host, but only {visible} {what}")


def _check_steps(cfg: Any, per_step: int) -> None:
    """The data is there, and an epoch has a timed step after the warm-up."""
    import math

    from benchlib import data

    steps = cfg.max_steps or 100  # synthetic data: 100 steps an epoch
    if cfg.dataset != "synthetic":
        samples = data.describe(cfg.path, cfg.dataset)["samples"]["train"]
        steps = min(steps, math.ceil(samples / per_step)) if cfg.max_steps else \
            math.ceil(samples / per_step)
    if cfg.warmup_steps >= steps:
        raise ConfigError("warmup_steps", f"{cfg.warmup_steps} leaves no timed step: an "
                          f"epoch here has {steps} steps")


MULTINODE_TRAINERS = ("lightning", "ddp")
MULTINODE_LAUNCHERS = ("torchrun", "lightning", "srun")


@dataclasses.dataclass
class MultinodeConfig(StudyConfig):
    """Lightning DDP against raw DDP across nodes (notebook 30, seeds 000 and 001):
    the same model and data, `nnodes` x `nproc_per_node` ranks."""

    trainer: str = "lightning"
    """lightning (a LightningModule, Trainer(strategy="ddp")) or ddp (benchlib's DDP loop)."""
    launcher: str = "torchrun"
    """torchrun (one agent per node, c10d rendezvous), lightning (Lightning's own: one
    process per node, it starts the local ranks) or srun (inside a Slurm job)."""
    nnodes: int = 2
    """Nodes; locally, each is its own agent or process group on this host."""
    nproc_per_node: int = 1
    """Devices (ranks) per node: the seed's --gpus."""
    dataset: str = "fashion-mnist"
    """fashion-mnist (seed 000), mydataset, cifar10, imagefolder or synthetic."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`, the same on every node."""
    model: str = "toynet"
    """toynet (28x28 data), simplecnn, pyramidnet, resnet18 or resnet50."""
    depth: int = 20
    """PyramidNet depth, 6n + 2."""
    alpha: int = 48
    """PyramidNet widening."""
    epochs: int = 2
    """Epochs per launch (seed: 5); each is one sample of the spread."""
    repeats: int = 1
    """Launches of the whole run (seed: 10): the spread includes start-up and placement."""
    batch_size: int = 32
    """Per device (seed 000: 32)."""
    num_workers: int = 0
    """DataLoader workers per rank."""
    warmup_steps: int = 3
    """Steps left out at the start of every epoch."""
    max_steps: int = 0
    """Steps per epoch; 0 runs whole epochs."""
    lr: float = 0.01
    """SGD learning rate (momentum 0.9)."""
    device: str = "auto"
    """cpu, gpu or auto."""
    backend: str = "auto"
    """auto (nccl on CUDA, gloo on CPU), gloo or nccl."""
    join_timeout_s: int = 120
    """How long the nodes wait for each other at the rendezvous before failing."""
    timeout_s: int = 900
    """The whole launch, and every collective, time out after this."""
    seed: int = 0
    """Seed of weights, shuffling and augmentation."""

    def validate(self) -> None:
        from benchlib.dist import BACKENDS

        require_choice("trainer", self.trainer, MULTINODE_TRAINERS)
        require_choice("launcher", self.launcher, MULTINODE_LAUNCHERS)
        require_choice("backend", self.backend, BACKENDS)
        if self.trainer == "ddp" and self.launcher == "lightning":
            raise ConfigError("launcher", "lightning is Lightning's own launcher; trainer ddp "
                              "starts with torchrun or srun")
        require_min("nnodes", self.nnodes, 1)
        require_min("nproc_per_node", self.nproc_per_node, 1)
        require_min("join_timeout_s", self.join_timeout_s, 1)
        require_min("repeats", self.repeats, 1)
        _check_training(self)

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def check_runtime(self) -> None:
        """Locally: the ranks fit this host. Under Slurm the nodes are checked where the
        row runs (and the partition's node size before submitting)."""
        if self.launcher == "srun":
            from benchlib import slurm

            capacity = slurm.node_capacity()
            slurm.check_layout(self.trainer, self.nnodes, self.nproc_per_node,
                               gpu=self.device == "gpu", capacity=capacity)
            return
        cuda = _check_device_and_backend(self.device, self.backend)
        _check_ranks_fit("nproc_per_node", self.world_size, cuda)
        _check_steps(self, self.batch_size * self.world_size)


ELASTIC_DATASETS = ("fashion-mnist", "mydataset", "cifar10", "imagefolder", "dummy")


@dataclasses.dataclass
class ElasticConfig(StudyConfig):
    """Fault tolerance (notebook 35, seed 001): an elastic run through torchrun with
    `--max-restarts`, a rank killed on purpose, the restart, the resume from the last
    checkpoint; and the same run uninterrupted, to compare the final loss."""

    dataset: str = "fashion-mnist"
    """fashion-mnist, mydataset, cifar10, imagefolder or dummy (random images, no files)."""
    path: str = "outputs/data"
    """Folder prepared by `benchlib data`."""
    model: str = "toynet"
    """toynet (28x28 data), simplecnn, pyramidnet, resnet18 or resnet50."""
    nproc_per_node: int = 2
    """Ranks (torchrun --standalone)."""
    epochs: int = 2
    """Epochs."""
    max_steps: int = 20
    """Steps per epoch; 0 runs whole epochs."""
    batch_size: int = 16
    """Per rank."""
    lr: float = 0.05
    """SGD learning rate (momentum 0.9, cosine schedule)."""
    checkpoint_every: int = 4
    """Steps between checkpoints (and one at the end of every epoch)."""
    max_restarts: int = 1
    """torchrun --max-restarts."""
    fail_at_step: int = 15
    """Kill a rank after this global step in the first attempt; 0: no failure."""
    fail_rank: int = 1
    """The rank killed."""
    compare_uninterrupted: bool = True
    """Also run it without the failure and compare the final loss."""
    device: str = "auto"
    """cpu, gpu or auto."""
    timeout_s: int = 600
    """The whole launch, and every collective."""
    seed: int = 0
    """Seed of weights, data order and augmentation."""

    def validate(self) -> None:
        require_choice("dataset", self.dataset, ELASTIC_DATASETS)
        require_choice("model", self.model, MODELS)
        require_choice("device", self.device, DEVICES)
        for name in ("nproc_per_node", "epochs", "batch_size", "timeout_s"):
            require_min(name, getattr(self, name), 1)
        for name in ("max_steps", "checkpoint_every", "max_restarts", "fail_at_step"):
            require_min(name, getattr(self, name), 0)
        if not 0 <= self.fail_rank < self.nproc_per_node:
            raise ConfigError("fail_rank", f"must be in [0, {self.nproc_per_node}), got {self.fail_rank}")
        if self.fail_at_step and not self.max_restarts:
            raise ConfigError("max_restarts", "0 with a failure injected: the run cannot recover; "
                              "set max_restarts >= 1 or fail_at_step 0")
        if self.model == "toynet" and self.dataset not in (*GRAY_28, "dummy"):
            raise ConfigError("model", "toynet takes 1x28x28 inputs: use fashion-mnist or "
                              "mydataset, or simplecnn / pyramidnet")

    def check_runtime(self) -> None:
        cuda = _check_device_and_backend(self.device, "auto")
        _check_ranks_fit("nproc_per_node", self.nproc_per_node, cuda)
        if self.dataset != "dummy":
            from benchlib import data

            data.describe(self.path, self.dataset)


@dataclasses.dataclass
class FrameworkConfig(StudyConfig):
    """ResNet throughput measured the DLPerf way (notebook 40, seed 003): skip the first
    `skip_steps`, warm up `warmup_steps` more, average the next `timed_steps`."""

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
    """Repeats of the window; the median is reported."""
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
        from benchlib.dist import BACKENDS

        require_choice("arch", self.arch, ("resnet18", "resnet50"))
        require_choice("dataset", self.dataset, ("synthetic", "imagefolder"))
        require_choice("precision", self.precision, PRECISIONS)
        require_choice("launcher", self.launcher, LAUNCHERS)
        require_choice("device", self.device, DEVICES)
        require_choice("backend", self.backend, BACKENDS)
        for name in ("batch_size", "nproc_per_node", "timed_steps", "repeats", "timeout_s"):
            require_min(name, getattr(self, name), 1)
        for name in ("skip_steps", "warmup_steps", "num_workers"):
            require_min(name, getattr(self, name), 0)
        require_min("image_size", self.image_size, 32)

    @property
    def steps(self) -> int:
        return self.skip_steps + self.warmup_steps + self.timed_steps

    def check_runtime(self) -> None:
        import os

        import torch

        from benchlib import data
        from benchlib.dist import choose_backend

        check_device(self.device)
        cuda = self.device == "gpu" or (self.device == "auto" and torch.cuda.is_available())
        check_precision(self.precision, "cuda" if cuda else "cpu")
        choose_backend("cuda" if cuda else "cpu", self.backend)
        visible = torch.cuda.device_count() if cuda else (os.cpu_count() or 1)
        if self.nproc_per_node > visible:
            what = "GPUs are visible" if cuda else "CPU cores are there (one rank each)"
            raise ConfigError("nproc_per_node", f"{self.nproc_per_node} asked for, but only "
                              f"{visible} {what}")
        if self.dataset == "imagefolder":
            have = data.describe(self.path, "imagefolder")["samples"]["train"]
            steps = have // (self.batch_size * self.nproc_per_node)
            if steps < self.steps:
                raise ConfigError("timed_steps", f"the image folder has {have} training images: "
                                  f"{steps} steps of batch {self.batch_size} x {self.nproc_per_node}, "
                                  f"fewer than the {self.steps} skipped, warm-up and timed steps; "
                                  "use more images or fewer steps")


@dataclasses.dataclass
class AnalysisConfig(StudyConfig):
    """The analysis notebook (90): where the records are."""

    results_dir: str = "outputs/results"
    """Folder of result records (one sub-folder per study)."""


@dataclasses.dataclass
class CompareConfig(StudyConfig):
    """The comparison notebook (95): two result sets side by side."""

    results_dir: str = "outputs/results"
    """Folder of result records (one sub-folder per study)."""
    base: str = ""
    """The result set before: a label or a folder; empty with `new` empty: the newest set
    against the newest older one that shares a row with it."""
    new: str = ""
    """The result set to judge: a label or a folder."""
    threshold: float = 0.10
    """Smallest change in speed that counts (0.10 = 10%; README explains the default)."""
    metric: str = ""
    """One metric to compare ('all': every one with a direction); empty: each row's main one."""
    study: str = ""
    """Only this study; empty: every study both sets have."""

    def validate(self) -> None:
        if not 0 < self.threshold < 1:
            raise ConfigError("threshold", f"must be above 0 and below 1 (0.05 = 5%), got "
                              f"{self.threshold}")
        if bool(self.base) != bool(self.new):
            raise ConfigError("base", "give base and new, or neither (the two newest sets)")


CONFIGS: dict[str, type[StudyConfig]] = {
    "DataPrepConfig": DataPrepConfig,
    "AnalysisConfig": AnalysisConfig,
    "CompareConfig": CompareConfig,
    "IOConfig": IOConfig,
    "DistConfig": DistConfig,
    "FrameworkConfig": FrameworkConfig,
    "MultinodeConfig": MultinodeConfig,
    "ElasticConfig": ElasticConfig,
}
