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
import re
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_min
from benchlib.config.choices import (
    AC_MODES,
    COMPILE_CACHES,
    COMPILE_MODES,
    CUDA_ONLY_COMPILE_MODES,
    FP8_FILTERS,
    FP8_RECIPES,
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
    """fp32, tf32 (Ampere+), amp_bf16, amp_fp16 (CUDA), or float8 training by torchao's
    recipe: fp8_tensorwise, fp8_rowwise or fp8_rowwise_gw_hp (its linears in FP8, the rest
    bf16; emulated, and no speed drawn, on a CPU or a GPU before sm_89)."""
    fp8_filter: str = "auto"
    """FP8's linears: auto (torchao's static filter), measured (`benchlib fp8-layers`'
    table at this shape), none (every linear), or module names kept in bf16, comma-separated."""
    fp8_all_gather: bool = False
    """fsdp2 with fp8_tensorwise: all-gather the weights in float8 (torchao's
    enable_fsdp_float8_all_gather)."""
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
        check_fp8(self)


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


FP8_NAMES = re.compile(r"\w[\w.]*(,\w[\w.]*)*")


def check_fp8(values: Any) -> None:
    """FP8's settings, in a config or a worker's parsed flags: a filter is auto, measured,
    none or module names; torchao has no static filter for fp8_rowwise_gw_hp, and float8
    all-gather is FSDP2's, with the tensorwise recipe only."""
    precision, chosen = values.precision, values.fp8_filter
    if chosen not in FP8_FILTERS and not FP8_NAMES.fullmatch(chosen):
        raise ConfigError("fp8_filter", f"{chosen!r} is not one of {', '.join(FP8_FILTERS)}, "
                          "nor module names kept in bf16, comma-separated (blocks.0.fc,head)")
    if precision not in FP8_RECIPES:
        if chosen != "auto" or values.fp8_all_gather:
            field = "fp8_filter" if chosen != "auto" else "fp8_all_gather"
            raise ConfigError(field, f"is float8 training's; precision is {precision}: set "
                              f"precision to one of {', '.join(FP8_RECIPES)}, or leave {field}")
        return
    if chosen == "auto" and precision == "fp8_rowwise_gw_hp":
        raise ConfigError("fp8_filter", "auto is torchao's static filter, which has no rule "
                          "for fp8_rowwise_gw_hp; use measured, none or module names")
    if values.fp8_all_gather and precision != "fp8_tensorwise":
        raise ConfigError("fp8_all_gather", f"torchao gathers float8 weights with the "
                          f"tensorwise recipe only; precision is {precision}: use "
                          "fp8_tensorwise, or no fp8_all_gather")
    strategy = getattr(values, "strategy", "single")  # a study without one: one process
    if values.fp8_all_gather and strategy != "fsdp2":
        raise ConfigError("fp8_all_gather", f"is FSDP2's all-gather; strategy is {strategy}")


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
