"""The single_device_io study's parameters (notebook 10_single_device_io and `python -m benchlib io`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_choice, require_min
from benchlib.config.choices import (
    IO_DATASETS,
    IO_MODELS,
    MODES,
    SHARD_CACHES,
    SHARD_FORMATS,
    STORES,
    VARIANTS,
    WORKER_STARTS,
    model_kind,
)
from benchlib.config.model_data import ModelDataConfig
from benchlib.config.training import LoaderConfig, ScheduleConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class SingleDeviceIoConfig(ScheduleConfig, LoaderConfig, ModelDataConfig):
    """Single-device IO (notebook 10, `python -m benchlib io`): seed 000's singlegpu.py
    and test_funcs.py. The model and data, the loader and the schedule are the training
    studies' (benchlib.config.model_data, benchlib.config.training), with seed 000's
    defaults: its data sets, 1x28x28 images of 10 classes, SGD without momentum."""

    defaults: ClassVar[dict[str, Any]] = {"dataset": "fashion-mnist", "model": "toynet",
                                          "batch_size": 64, "warmup_steps": 5, "lr": 1e-3,
                                          "momentum": 0.0}

    variant: str = "raw"
    """Storage variant: raw, preload, preload_batched, tensorclass, tensorclass_memmap,
    np_memmap; or shards read by their library: wds (WebDataset tar), litdata (LitData
    chunks), mds (Mosaic MDS), written by `benchlib data --shards`."""
    mode: str = "train"
    """traverse (iterate and move batches) or train (the full step)."""
    repeats: int = 3
    """Independent repeats, each with a fresh DataLoader (seed 000: 10)."""
    profile: bool = False
    """Run extra steps under torch.profiler and show the top operators."""
    export_trace: bool = False
    """Write the profiled steps as a Chrome trace under outputs/traces/."""
    shard_mb: float = 4.0
    """Shard variants: the shards' size in MB, as `benchlib data --shards --shard-mb` wrote them."""
    store: str = "local"
    """Shard variants: local (their folder under path) or s3 (an object store: the
    workbook's own on loopback, started if need be, or store_endpoint's)."""
    store_endpoint: str = ""
    """store s3: the endpoint URL; empty: the workbook's own (`benchlib store start`). Its
    keys come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."""
    store_url: str = ""
    """store s3: s3://BUCKET/PREFIX of the shards; empty: where `benchlib data --shards
    --store s3` put them (s3://benchlib/DATASET/VARIANT-SHARD_MBmb)."""
    link_mibps: float = 0.0
    """store s3: the link's bandwidth in MiB/s, shared by every worker (0: no cap)."""
    link_latency_ms: float = 0.0
    """store s3: latency added to every request, in ms."""
    cache: str = "keep"
    """store s3: keep (the library's local copies serve the next epoch) or drop (emptied
    before every epoch); every repeat starts with an empty cache."""
    prefetch_factor: int = 2
    """Shard variants with workers: batches each DataLoader worker fetches ahead."""
    multiprocessing_context: str = "fork"
    """Shard variants with workers: how the DataLoader starts them. fork (Linux's default):
    a copy of the reading process, sharing what it opened (a reader's S3 client and its
    keep-alive connection); forkserver or spawn: a fresh process each, which imports and
    connects on its own (slower to start)."""

    def validate(self) -> None:
        # checked here, not as the flags' choices: `benchlib io` says them in its one line
        require_choice("dataset", self.dataset, IO_DATASETS)
        require_choice("variant", self.variant, VARIANTS)
        require_choice("mode", self.mode, MODES)
        if self.model not in IO_MODELS and model_kind(self.model) not in ("entry", "timm"):
            raise ConfigError("model", f"{self.model!r} is not one of {', '.join(IO_MODELS)}, "
                              "nor pkg.module:function or timm:NAME (1x28x28 inputs, 10 classes)")
        if self.model_args and self.model in IO_MODELS:
            raise ConfigError("model_args", f"{self.model} is built in and takes none; "
                              "model_args are for pkg.module:function and timm:NAME")
        super().validate()
        require_min("repeats", self.repeats, 1)
        if self.export_trace and not self.profile:
            raise ConfigError("export_trace", "needs profile = True (the trace is the profiled steps)")
        self._validate_shards()

    def _validate_shards(self) -> None:
        """The shard fields, each only where it means something."""
        if not self.shard_mb > 0:
            raise ConfigError("shard_mb", f"must be > 0 MB (a shard holds at least one sample), "
                              f"got {self.shard_mb:g}")
        require_choice("store", self.store, STORES)
        require_choice("cache", self.cache, SHARD_CACHES)
        require_min("prefetch_factor", self.prefetch_factor, 1)
        require_choice("multiprocessing_context", self.multiprocessing_context, WORKER_STARTS)
        if self.multiprocessing_context != "fork" and (self.variant not in SHARD_FORMATS
                                                       or not self.num_workers):
            raise ConfigError("multiprocessing_context", "starts the workers of a shard variant "
                              f"({', '.join(SHARD_FORMATS)}) with num_workers >= 1; "
                              f"got variant {self.variant}, num_workers {self.num_workers}")
        if self.profile and self.variant in SHARD_FORMATS:
            raise ConfigError("profile", f"profiles the in-memory variants, not {self.variant}'s "
                              "reader (its waits and stalls are in the record)")
        if self.store == "s3" and self.variant not in SHARD_FORMATS:
            raise ConfigError("store", f"s3 reads shards: use variant {', '.join(SHARD_FORMATS)}, "
                              f"not {self.variant}")
        for name in ("store_endpoint", "store_url", "link_mibps", "link_latency_ms"):
            if getattr(self, name) and self.store != "s3":
                raise ConfigError(name, "is for store s3 (shards read from an object store)")
        for name in ("link_mibps", "link_latency_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"must be >= 0 (0: none), got {getattr(self, name):g}")
        if self.store_url and not (self.store_url.startswith("s3://")
                                   and self.store_url[5:].split("/")[0]):
            raise ConfigError("store_url", f"{self.store_url!r} is not s3://BUCKET/PREFIX")
        if self.store_endpoint and not self.store_endpoint.startswith(("http://", "https://")):
            raise ConfigError("store_endpoint", f"{self.store_endpoint!r} is not an http:// or "
                              "https:// URL")
