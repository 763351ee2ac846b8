"""The GPU check's compile steps (part 3, one call): notebook 55's rows for ResNet-50 and
gpt2-124m (params/compile_gpu.yaml) with one launch a side instead of five, each launch the
training worker with the parameters the compile study gives it
(`benchlib.studies.compile.trainer_params`): eager, then compiled cold (an empty inductor
cache, kept for the next step), then compiled warm (a copy of that cache). The compiled
steps' figures are read against the eager step's result of the same model: the compile's
seconds (the first steps less eager's), the steady speedup, the break-even steps (one
launch a side: no interval), graph breaks, recompiles and the cache's hits and misses.

Expected seconds are estimates, not yet measured by this step on a GPU: the ResNet-50
compiled row of part 1 took 84 s with its 40-60 s cold compile on an H100, the gpt2-124m
compiled rows of part 2 44-53 s cold on an H200 (docs/gpu-check/), an eager launch about
20 s; a warm start is put at half a cold one's (dynamo and AOTAutograd still trace)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.config import CompileConfig
from benchlib.core import stats

TABLE = "params/compile_gpu.yaml"
EXPECTED_S = {("resnet50", "eager"): 20, ("resnet50", "cold"): 85, ("resnet50", "warm"): 45,
              ("gpt2-124m", "eager"): 20, ("gpt2-124m", "cold"): 55, ("gpt2-124m", "warm"): 30}
PART = 3


def rows(table_rows: Callable[..., list[Any]]) -> list[CompileConfig]:
    """TABLE's rows as notebook 55 reads them (by steps.table_rows), one launch a side."""
    return table_rows(TABLE, CompileConfig, "notebook 55", {"repeats": 1})


def step_name(model: str, side: str) -> str:
    return f"compile_{model.replace('-', '_')}_{side}"


# the steps whose expected seconds are the estimates above (the dry run says so)
ESTIMATED = frozenset(step_name(model, side) for model, side in EXPECTED_S)


def first_s(result: dict[str, Any], warmup: int) -> float:
    """A launch's first `warmup` steps' seconds (where a compile happens)."""
    return sum(result["details"]["steps_s"][:warmup])


def eager_figures(warmup: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def figures(result: dict[str, Any]) -> dict[str, Any]:
        return {**result["metrics"], "first_steps_s": first_s(result, warmup)}
    return figures


def compiled_figures(eager_result: str, warmup: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A compiled step's figures against the eager step's result (`eager_result`, a file)."""
    def figures(result: dict[str, Any]) -> dict[str, Any]:
        eager = json.loads(Path(eager_result).read_text())
        m, e = result["metrics"], eager["metrics"]
        be = stats.break_even([(first_s(result, warmup), m["samples_per_s"])],
                              [(first_s(eager, warmup), e["samples_per_s"])], m["global_batch"])
        return {**m, "first_steps_s": first_s(result, warmup),
                "eager_first_steps_s": first_s(eager, warmup), "compile_s": be.compile_s,
                "eager_samples_per_s": e["samples_per_s"],
                "speedup": m["samples_per_s"] / e["samples_per_s"],
                "break_even": stats.break_even_text(be.steps, None, None, 1),
                "break_even_steps": be.steps}
    return figures


def plan(out: Path, res: Callable[[str], str], study_step: Callable[..., Any],
         table_rows: Callable[..., list[Any]]) -> list[Any]:
    """Per model of TABLE: its eager, cold and warm steps, in that order, each made by
    `study_step` (steps._study_step: the worker with its run.json) from its row."""
    from benchlib.studies.compile import trainer_params

    steps = []
    for cfg in rows(table_rows):
        cache = str(out / "work" / f"compile-cache-{cfg.model}")
        eager = step_name(cfg.model, "eager")
        if cfg.compile_cache == "cold":
            steps.append(study_step(eager, out, res, cfg, "single",
                                    trainer_params(cfg, "eager", 0),
                                    EXPECTED_S[cfg.model, "eager"],
                                    figures=eager_figures(cfg.warmup_steps), part=PART))
            extra = {"compile_cache_to": cache}
        else:
            extra = {"compile_cache_from": cache}
        steps.append(study_step(step_name(cfg.model, cfg.compile_cache), out, res, cfg,
                                "single", {**trainer_params(cfg, "compiled", 0), **extra},
                                EXPECTED_S[cfg.model, cfg.compile_cache],
                                figures=compiled_figures(res(eager), cfg.warmup_steps),
                                part=PART))
    return sorted(steps, key=lambda s: ("gpt2" in s.name, ("eager", "cold", "warm").index(
        s.name.rpartition("_")[2])))
