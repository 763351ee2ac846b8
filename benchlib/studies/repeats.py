"""A run's repeats as its `repeat_mode` says, for the studies that launch workers
(dp_vs_ddp, multinode_lightning, framework_comparison).

- `epoch`: every epoch of every launch is one sample of the spread. Epochs inside one
  process share its luck (where its threads landed, what the allocator did, how busy
  the host was while it ran), so their spread understates how much a rerun moves.
- `process`: each launch is one sample, its figure the median over its own epochs;
  the spread then includes start-up, placement and whatever differs between runs.

Either way the details keep every epoch (naming its launch, `repeat`) and every
launch's figure (`launches`), so the analysis can show both spreads side by side.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from benchlib.core.stats import summarize
from benchlib.core.throughput import window_figures
from benchlib.launch.launcher import launch


def per_launch(launched: list[Any]) -> list[dict[str, Any]]:
    """Each launch's figure: its median samples/s over its epochs, its epochs, its wall time."""
    return [{"repeat": r, "samples_per_s": out.result["metrics"]["samples_per_s"],
             "epochs": len(out.result["details"]["epochs"]), "launch_s": out.wall_s}
            for r, out in enumerate(launched)]


def figures(repeat_mode: str, launched: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, details) of a row's launches (each a launch() result): samples/s
    summarized over epochs or over launches as `repeat_mode` says, the other per-epoch
    times as medians over every epoch, the shares of a step with the widest spread of any
    epoch, the start-up gap, and the launches' wall time."""
    epochs = [{**e, "repeat": r} for r, out in enumerate(launched)
              for e in out.result["details"]["epochs"]]
    launches = per_launch(launched)
    samples = launches if repeat_mode == "process" else epochs
    metrics = {**summarize([s["samples_per_s"] for s in samples], "samples_per_s",
                           independent=repeat_mode == "process"),
               "launch_s": statistics.median(out.wall_s for out in launched),
               "launches": len(launched)}
    metrics.update(window_figures(epochs, metrics["samples_per_s"]))
    return metrics, {"epochs": epochs, "launches": launches}


def token_figures(metrics: dict[str, Any]) -> dict[str, Any]:
    """A language model's samples/s as tokens/s (each figure of the spread times the ids
    per sample, `tokens_per_sample`, which its trainer records); nothing for images."""
    per_sample = metrics.get("tokens_per_sample")
    if not per_sample:
        return {}
    return {key.replace("samples_per_s", "tokens_per_s"): value * per_sample
            for key, value in metrics.items()
            if key.startswith("samples_per_s") and not key.endswith("_n")
            and isinstance(value, (int, float))}


def warm_start(module: str, params: dict[str, Any], log_dir: Path, launcher: str, nproc: int,
               cfg: Any) -> dict[str, Any]:
    """A row with `compile_cache: warm`: one launch first that compiles cold and keeps its
    inductor cache folder (`<log_dir>/compile-cache`), and the parameter that makes every
    timed launch start from a copy of it; nothing for another row."""
    if getattr(cfg, "compile_cache", "cold") != "warm":
        return {}
    cache = log_dir / "compile-cache"
    launch(module, {**params, "compile_cache": "cold", "compile_cache_to": str(cache)},
           log_dir / "prime", launcher, nproc, timeout_s=cfg.timeout_s)
    return {"compile_cache_from": str(cache)}


def launch_all(module: str, params: dict[str, Any], log_dir: Path, launcher: str, nproc: int,
               cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """`cfg.repeats` launches of a training worker (each its own log folder when there are
    several; a warm compile cache primed first: `warm_start`), summarized as
    `cfg.repeat_mode` says: the first launch's metrics with the run's figures (a language
    model's tokens/s too), and its details with every launch's."""
    params = {**params, **warm_start(module, params, log_dir, launcher, nproc, cfg)}
    launched = [launch(module, params, log_dir / ("train" if cfg.repeats == 1 else f"train-{r}"),
                       launcher, nproc, timeout_s=cfg.timeout_s) for r in range(cfg.repeats)]
    metrics, details = of_launches(cfg.repeat_mode, launched)
    return {**metrics, "log_dir": str(log_dir)}, details


def of_launches(repeat_mode: str, launched: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, details) of a row's launches (each a launch() result, or one that looks
    like it: the GPU check's): the first launch's metrics with the run's `figures` (a
    language model's tokens/s too), and its details with every epoch's and launch's."""
    run, details = figures(repeat_mode, launched)
    metrics = {**launched[0].result["metrics"], **run}
    metrics.update(token_figures(metrics))
    return metrics, {**launched[0].result["details"], **details}
