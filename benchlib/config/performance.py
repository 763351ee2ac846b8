"""Performance settings a trainer applies to the same work: numeric precision,
torch.compile and its cache, the memory format, activation checkpointing and the input's
side. Declared once; notebooks 40, 50 and 55 compose them, and the training workers
generate their flags from them (benchlib.config.flags), each taking those its loop applies.
The folders a warm start's cache comes from and goes to are `CompileCacheConfig`'s, set
by a study's launch and never a notebook's parameters.

`compile` was a switch; a table's old `compile: true` is read as `default` and `false`
as `off`, with a note, as parameter tables read an old name (`StudyConfig.old_values`,
beside `renamed`: notebook 40's `arch`, read as `model`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_min
from benchlib.config.choices import (
    AC_MODES,
    COMPILE_CACHES,
    COMPILE_MODES,
    CUDA_ONLY_COMPILE_MODES,
    PRECISIONS,
)
from benchlib.errors import ConfigError


@dataclasses.dataclass
class PerformanceConfig(StudyConfig):
    """How the same training step is made faster: none of it changes what is learned."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"precision": PRECISIONS, "ac": AC_MODES,
                                                     "compile": COMPILE_MODES,
                                                     "compile_cache": COMPILE_CACHES}
    old_values: ClassVar[dict[str, dict[Any, Any]]] = {"compile": {True: "default",
                                                                   False: "off"}}

    precision: str = "fp32"
    """fp32, tf32 (Ampere+), amp_bf16 or amp_fp16 (CUDA)."""
    compile: str = "off"
    """torch.compile: off, default, reduce-overhead (CUDA graphs: a GPU's), max-autotune,
    or regional (each block compiled on its own); its compile falls in the warm-up steps
    (true reads as default, false as off)."""
    compile_cache: str = "cold"
    """Where a compiled run's compile cache starts: cold (empty) or warm (the inductor
    cache folder an earlier process of the same work filled)."""
    channels_last: bool = False
    """NHWC memory format for images (faster with AMP on tensor cores)."""
    ac: str = "none"
    """Activation checkpointing per block: none, selective (keep the matmuls' outputs,
    recompute the rest) or full (recompute each block's forward in backward)."""
    image_size: int = 224
    """Side in pixels of the images imagefolder and synthetic data give (224 as on
    ImageNet; small on CPU)."""

    def validate(self) -> None:
        super().validate()
        require_min("image_size", self.image_size, 1)
        if self.compile_cache == "warm" and self.compile == "off":
            raise ConfigError("compile_cache", "warm starts a compile from a cache, but "
                              "compile is off; set compile to a mode, or compile_cache cold")
        device = getattr(self, "device", "auto")  # a config that composes the device
        if device == "cpu":
            check_compile_device(self.compile, "cpu")


@dataclasses.dataclass
class CompileCacheConfig(StudyConfig):
    """The inductor cache folders of one compiled launch: set by the study's launch for a
    row's `compile_cache` warm (benchlib.studies.repeats.warm_start, the compile study:
    one launch fills a folder, the timed ones start from a copy), never by a row, so no
    study composes this piece; "" for none."""

    compile_cache_from: str = ""
    """compile_cache warm: the inductor cache folder an earlier process filled, copied into
    this process's own before it compiles (the study's launch sets it)."""
    compile_cache_to: str = ""
    """After training, keep this process's inductor cache folder here (rank 0), for a warm
    start later (the study's launch that fills one sets it)."""


def check_compile_cache(values: Any) -> None:
    """A warm start and its folder, in a worker's parsed flags: warm needs the folder an
    earlier process filled, and a folder to start from is a warm start's."""
    if values.compile_cache == "warm" and not values.compile_cache_from:
        raise ConfigError("compile_cache", "warm needs the cache an earlier process filled: "
                          "--compile-cache-from DIR (notebooks 40, 50 and 55 pass it; fill one "
                          "with --compile-cache-to DIR)")
    if values.compile_cache_from and values.compile_cache == "cold":
        raise ConfigError("compile_cache_from", "is a warm start's; compile_cache is cold")


def check_compile_device(mode: str, device_type: str) -> None:
    """A compile mode the device cannot run, refused in one line: reduce-overhead replays
    CUDA graphs, which a CPU has none of."""
    if mode in CUDA_ONLY_COMPILE_MODES and device_type != "cuda":
        others = ", ".join(m for m in COMPILE_MODES if m not in CUDA_ONLY_COMPILE_MODES)
        raise ConfigError("compile", f"{mode} replays CUDA graphs, which need a GPU; on the "
                          f"{device_type.upper()} use one of {others}")


def compiled(value: Any) -> bool:
    """Whether a record's or a config's `compile` compiles (true and the modes but off)."""
    return value not in (False, None, "off", "") and value == value  # NaN: not recorded


def compile_mode(value: Any) -> str:
    """A record's `compile` as a mode: an old record's true is default, false off."""
    if not compiled(value):
        return "off"
    return value if isinstance(value, str) else "default"  # true, as numpy's bool too
