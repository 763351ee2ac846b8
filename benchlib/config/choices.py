"""The allowed values and named defaults of the study parameters, in one place: the
configs check against these, and the modules that implement them import them."""

import re

DEVICES = ("cpu", "gpu", "auto")  # gpu: an error without CUDA; auto: a GPU if there is one
BACKENDS = ("auto", "gloo", "nccl")  # auto: nccl on CUDA, gloo on CPU
DEFAULT_PORT = 29500  # the rendezvous port torchrun and Slurm scripts use unless told
SYNTHETIC_STEPS = 100  # steps in an epoch of synthetic data (made on the device, no IO)
# the scaling projection's bounds: nodes, and devices (or CPU ranks) per node
PROJECTION_MAX_NODES = 1024
PROJECTION_MAX_DEVICES_PER_NODE = 1024

DATASETS_PREPARED = ("fashion-mnist", "mydataset", "cifar10", "imagefolder", "tokenfile")
IO_DATASETS = ("fashion-mnist", "mydataset")
GRAY_28 = ("fashion-mnist", "mydataset")  # 1x28x28 inputs
# a language model's: tokens, synthetic token ids made on the device; tokenfile, token ids
# read from the uint16 memmap `benchlib data` writes (nanoGPT's train.bin)
TOKEN_DATASETS = ("tokens", "tokenfile")
TRAIN_DATASETS = ("cifar10", "fashion-mnist", "mydataset", "synthetic", "imagefolder",
                  *TOKEN_DATASETS)
MADE_ON_DEVICE = ("synthetic", "tokens")  # no files: nothing to prepare, nothing to read
ELASTIC_DATASETS = ("fashion-mnist", "mydataset", "cifar10", "imagefolder", "dummy")
FRAMEWORK_DATASETS = ("synthetic", "imagefolder")

SHARD_FORMATS = ("wds", "litdata", "mds")  # WebDataset tar, LitData chunks, Mosaic MDS
IN_MEMORY_VARIANTS = ("raw", "preload", "preload_batched", "tensorclass", "tensorclass_memmap",
                      "np_memmap")  # map-style, by index (benchlib.data.storage)
VARIANTS = (*IN_MEMORY_VARIANTS, *SHARD_FORMATS)
STORES = ("local", "s3")  # shards read from their folder, or from an S3 endpoint
SHARD_CACHES = ("keep", "drop")  # a store's copies kept for the next epoch, or emptied
# how DataLoader workers start (its multiprocessing_context): forked from the reading process
# (Linux's default: they share what it opened, an S3 client's connection too), or fresh
WORKER_STARTS = ("fork", "forkserver", "spawn")
MODES = ("traverse", "train")
GPT_MODELS = ("gpt-tiny", "gpt2-124m", "gpt2-350m")  # benchlib.core.gpt: language models
MODELS = ("toynet", "simplecnn", "pyramidnet", "resnet18", "resnet50", *GPT_MODELS)
# beside the built-in names: the user's own code (benchlib.core.entrypoints), and models of
# the field's libraries built from a config, never a download (benchlib.core.models)
ENTRY_POINT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
MODEL_LIBRARIES = {"timm": "timm", "hf": "transformers"}  # prefix: the package it needs
MODEL_FORMS = "pkg.module:function, timm:NAME or hf:NAME"
DATASET_FORMS = "pkg.module:function"
IO_MODELS = ("toynet", "simplecnn", "pyramidnet")  # 1x28x28 inputs
ARCHS = ("resnet18", "resnet50")
# float8 training (torchao's convert_to_float8_training, benchlib.trainers.fp8): each
# precision a torchao recipe, by the recipe's name (Float8LinearConfig.from_recipe_name):
# dynamic scales per tensor, per row, or per row with the weight's gradient in bf16;
# its converted linears in FP8, everything else in bf16 (autocast, FSDP2's bf16 params)
FP8_RECIPES = {"fp8_tensorwise": "tensorwise", "fp8_rowwise": "rowwise",
               "fp8_rowwise_gw_hp": "rowwise_with_gw_hp"}
PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16", *FP8_RECIPES)
# which linears FP8 converts: torchao's static filter (auto: thresholds from H100
# benchmarks), the per-layer table `benchlib fp8-layers` measured at the model's own shapes
# (measured), every linear (none), or module names kept in bf16 (comma-separated)
FP8_FILTERS = ("auto", "measured", "none")

STRATEGIES = ("single", "dp", "ddp")
# the transformer study's (notebook 50): FSDP2 shards parameters, gradients and optimizer
# state over the ranks (torch.distributed.fsdp.fully_shard per block)
LM_STRATEGIES = ("single", "ddp", "fsdp2")
AC_MODES = ("none", "selective", "full")  # activation checkpointing per block
# how a trainer saves its state to resume from (benchlib.trainers.saver): torch.save by rank
# 0 of the whole state; torch.distributed.checkpoint (DCP), every rank its part, blocking;
# DCP's async_save (staged to CPU memory, written in the background); and the same staged
# into pinned memory (DCP's DefaultStager), the faster copy from a GPU
CHECKPOINT_MODES = ("torch_save", "dcp", "dcp_async", "dcp_async_pinned")
# torch.compile: off, the whole model in one of torch.compile's modes, or each block on its
# own (regional, as torchtitan compiles transformer blocks); reduce-overhead replays CUDA
# graphs, which a CPU has none of
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune", "regional")
CUDA_ONLY_COMPILE_MODES = ("reduce-overhead",)
# where a compiled run's compile cache starts: empty (cold), or the folder an earlier
# process of the same work filled (warm: its FX graphs, AOTAutograd graphs and kernels)
COMPILE_CACHES = ("cold", "warm")
LAUNCHERS = ("torchrun", "mp_spawn", "tcp")  # how DDP ranks start on one host
MULTINODE_TRAINERS = ("lightning", "ddp")
MULTINODE_LAUNCHERS = ("torchrun", "lightning", "srun")

# what one sample of a run's spread is: an epoch inside one launch (all of them pooled
# over the launches), or a whole launch (a fresh process per repeat: its median over its
# epochs), which also sees start-up, placement and whatever else differs between runs
REPEAT_MODES = ("epoch", "process")


def is_entry_point(value: str) -> bool:
    """`pkg.module:function`, as setuptools names an entry point."""
    return bool(ENTRY_POINT.fullmatch(value)) and value.partition(":")[0] not in MODEL_LIBRARIES


def model_kind(name: str) -> str | None:
    """builtin, timm, hf or entry (the user's pkg.module:function); None: not a model name."""
    if name in MODELS:
        return "builtin"
    prefix, colon, rest = name.partition(":")
    if colon and prefix in MODEL_LIBRARIES and rest:
        return prefix
    return "entry" if is_entry_point(name) else None


def is_shards(value: str) -> bool:
    """`FORMAT:LOCATION`: shards of a format of SHARD_FORMATS in a folder (a path with a
    slash) or at s3://BUCKET/PREFIX, read by their library (benchlib.shards.for_training)."""
    fmt, sep, where = value.partition(":")
    return bool(sep) and fmt in SHARD_FORMATS and "/" in where


def dataset_kind(name: str) -> str | None:
    """builtin (a name in TRAIN_DATASETS) or entry (the user's own: by entry point, or as
    shards, `is_shards`); None: not a data set name."""
    if name in TRAIN_DATASETS:
        return "builtin"
    return "entry" if is_entry_point(name) or is_shards(name) else None
# how the rank an injected failure names fails: an exception (its marker and log line), or
# SIGKILL from itself, as the OOM killer does (no exception, no cleanup)
FAIL_HOWS = ("raise", "kill")
# how an injected delay varies by step, epoch and rank (benchlib.core.delays.delay_factor):
# the ground truth's cases, each one a figure could get wrong
DELAY_PATTERNS = ("uniform", "slow_warmup", "heavy_tail", "slow_epoch", "slow_rank")
