"""A study's launches and the one loop that runs them; a row's repeats summarized as its
`repeat_mode` says.

Every study module says what it launches as data: `launches(cfg, run_id)`, a list of
`Launch` (the worker, its parameters, how its processes start, its log folder, its role
among the row's launches and its repeat), in the order they run: interleaved where the
study interleaves (notebook 55's eager and compiled sides), a warm compile cache's priming
launch first (`warm_start`). `launch_all` runs such a list; nothing else in the studies
starts a worker. The GPU check's steps, the parameter tests and `run` read the same list.

- `epoch`: every epoch of every launch is one sample of the spread. Epochs inside one
  process share its luck (where its threads landed, what the allocator did, how busy
  the host was while it ran), so their spread understates how much a rerun moves.
- `process`: each launch is one sample, its figure the median over its own epochs;
  the spread then includes start-up, placement and whatever differs between runs.

Either way the details keep every epoch (naming its launch, `repeat`) and every
launch's figure (`launches`), so the analysis can show both spreads side by side.
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchlib import paths
from benchlib.core.stats import summarize
from benchlib.core.throughput import window_figures
from benchlib.launch.launcher import LaunchResult, launch


@dataclass(frozen=True)
class Launch:
    """One launch a study plans: `python -m benchlib.workers.<worker>` with `params` (its
    run.json, or a list of flags for JAX's worker), `nproc` processes a node on `nnodes`
    nodes started the `launcher` way, `options` the rest of launch()'s (max_restarts,
    join_timeout_s, srun_torchrun, env), stopped after `timeout_s`; its logs in `log` under the
    row's log folder ("" the folder itself). `role` tells it from the row's other launches
    (train, prime, eager, compiled, interrupted, uninterrupted, allreduce, jax, trial),
    `repeat` is its index among those of its role. `fresh`: a folder emptied before it
    starts (the fault study's checkpoints: a new run, not a resume of the last one).
    `handed`: the config's fields this launch gives its worker otherwise than the config
    holds them, on purpose (the eager side's compile off, DLPerf's warm-up)."""

    worker: str
    params: dict[str, Any] | list[str]
    launcher: str = "single"
    nproc: int = 1
    nnodes: int = 1
    timeout_s: float = 600.0
    log: str = ""
    role: str = "train"
    repeat: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    fresh: str = ""
    handed: tuple[str, ...] = ()


def row_logs(run_id: str) -> Path:
    """A row's log folder, which its launches' folders are under."""
    return paths.outputs_dir() / "logs" / run_id


def launch_all(planned: list[Launch], log_dir: Path) -> list[LaunchResult]:
    """Each launch of `planned` in its order (its `fresh` folder emptied first), its logs
    under `log_dir`; their results in the same order. A failed launch stops the rest."""
    done = []
    for item in planned:
        if item.fresh:
            shutil.rmtree(item.fresh, ignore_errors=True)
        done.append(launch(item.worker, item.params, log_dir / item.log, item.launcher,
                           item.nproc, timeout_s=item.timeout_s, nnodes=item.nnodes,
                           **item.options))
    return done


def of_role(planned: list[Launch], done: list[LaunchResult], role: str) -> list[LaunchResult]:
    """The results of `role`'s launches (`done`: launch_all's of `planned`), in order."""
    return [out for item, out in zip(planned, done) if item.role == role]


def repeated(base: Launch, count: int, one: str = "train") -> list[Launch]:
    """`count` launches of `base`, each a log folder of its own when there are several
    (train-0, train-1, ...), `one` when there is one."""
    return [replace(base, log=one if count == 1 else f"train-{r}", repeat=r)
            for r in range(count)]


def warm_start(planned: list[Launch], root: Path, cfg: Any, role: str = "train") -> list[Launch]:
    """A row with `compile_cache: warm`: one launch first, the first of `role` compiling
    cold and keeping its inductor cache folder (`<root>/compile-cache`), and every launch
    of `role` starting from a copy of it; the list as it is for another row."""
    if getattr(cfg, "compile_cache", "cold") != "warm":
        return planned
    cache = str(root / "compile-cache")
    first = next(x for x in planned if x.role == role)
    prime = replace(first, params={**first.params, "compile_cache": "cold",
                                   "compile_cache_to": cache},
                    log="prime", role="prime", repeat=0, handed=(*first.handed, "compile_cache"))
    return [prime, *(replace(x, params={**x.params, "compile_cache_from": cache})
                     if x.role == role else x for x in planned)]


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


def of_launches(repeat_mode: str, launched: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, details) of a row's launches (each a launch() result, or one that looks
    like it: the GPU check's): the first launch's metrics with the run's `figures` (a
    language model's tokens/s too), and its details with every epoch's and launch's."""
    run, details = figures(repeat_mode, launched)
    metrics = {**launched[0].result["metrics"], **run}
    metrics.update(token_figures(metrics))
    return metrics, {**launched[0].result["details"], **details}
