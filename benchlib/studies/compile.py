"""The compile study (notebook 55): is torch.compile worth it for this job?

One row is one model and one compile mode with one cache (`compile_cache`). It launches
the training worker (`benchlib.workers.single`) `repeats` times eager and `repeats` times
compiled, interleaved (eager first in even rounds, compiled first in odd ones, so drift
falls on both), launch r of each side on seed + r: the same data and weights for the
pair, and eager's own run-to-run spread across the pairs. Every compiled launch starts
with an inductor cache folder of its own: empty (cold), or a copy of the one a priming
launch filled just before (warm; the priming launch is a cold compile, kept as
`cold_compile_s`).

Per launch, from the worker's first epoch: its first `warmup_steps` steps (where the
compile happens) and its steady step (global batch over its samples/s). Then:

    compile_s         a compiled launch's first steps less the eager launches' (median):
                      what compiling added, whatever eager's own start-up costs
    speedup           compiled samples/s over eager's, medians, with a bootstrap 95%
                      interval over launches and the one verdict rule (core.stats)
    break_even_steps  compile_s / (eager step - compiled step): the steady steps after
                      which the compile has paid for itself, with its interval; inf
                      ("never pays off") where the compiled step is not faster
    peak_mem_ratio    compiled peak memory over eager's (medians)
    loss_parity       the loss after the run's steps, compiled against eager on the same
                      seed, pair by pair within a stated relative tolerance (core.compile_cost)
    graph_breaks      in the model's forward, each with its reason and source line; and
                      recompiles, with their reasons (benchlib.core.compiler)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from benchlib.config import CompileConfig
from benchlib.config.performance import PerformanceConfig, check_compile_device
from benchlib.core import compile_cost, stats
from benchlib.core.throughput import SHARES
from benchlib.distributed.device import check_precision
from benchlib.launch.launcher import LaunchResult
from benchlib.studies import checks, fp8, repeats, training
from benchlib.studies.repeats import Launch

# a step's figures as the trainer gives them over its timed steps, kept of the first
# compiled launch so that diagnose can say what holds the compiled step back
STEP_FIGURES = ("batch_s", "data_s", "compute_s", "alloc_retries", "ooms", "peak_reserved_bytes",
                *(f"{share}{end}" for share in SHARES for end in ("", "_low", "_high")))


@dataclass
class CompileResult:
    metrics: dict[str, Any]
    details: dict[str, Any]


def launches(cfg: CompileConfig, run_id: str = "interactive") -> list[Launch]:
    """`repeats` launches a side, interleaved: eager first in even rounds, compiled first
    in odd ones; launch r of each side on seed + r. A warm row's priming launch (a cold
    compile that keeps its cache) first, every compiled launch starting from a copy."""
    planned = []
    for r in range(cfg.repeats):
        for side in ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager"):
            handed = (("seed",) if r else ()) + (("compile", "compile_cache") if side == "eager"
                                                 else ())
            planned.append(Launch("single", _trainer_params(cfg, side, r), "single",
                                  timeout_s=cfg.timeout_s, log=f"{side}-{r}", role=side,
                                  repeat=r, handed=handed))
    return repeats.warm_start(planned, repeats.row_logs(run_id), cfg, role="compiled")


def _trainer_params(cfg: CompileConfig, side: str, repeat: int) -> dict[str, Any]:
    """The worker's parameters for one launch (its run.json): the training fields and the
    performance settings by name, on seed + `repeat`; the eager side with compile off."""
    params = {**training.worker_params(cfg), **training.piece_params(cfg, PerformanceConfig),
              "seed": cfg.seed + repeat}
    if side == "eager":
        params.update(compile="off", compile_cache="cold")
    return params


def preflight(cfg: CompileConfig) -> None:
    """Where the row runs: device, precision, the compile mode on this device (reduce-
    overhead needs a GPU), the model and data built and one step's loss taken, blocks for
    regional, a steady step after the warm-up."""
    cuda = checks.device_and_backend(cfg.device, cfg.backend)
    check_precision(cfg.precision, "cuda" if cuda else "cpu")
    check_compile_device(cfg.compile, "cuda" if cuda else "cpu")
    job = checks.own_job(cfg)
    samples = checks.own_code_trains(cfg, job)
    checks.blocks_fit(cfg, job)
    checks.fp8_fits(cfg, cuda, job)
    checks.steps_fit(cfg, cfg.batch_size, samples)


def run(cfg: CompileConfig, run_id: str = "interactive") -> CompileResult:
    preflight(cfg)
    log_dir, planned = repeats.row_logs(run_id), launches(cfg, run_id)
    read = [_read(cfg, x, out) for x, out in zip(planned, repeats.launch_all(planned, log_dir))]
    priming = next((x for x, item in zip(read, planned) if item.role == "prime"), None)
    launched = [x for x, item in zip(read, planned) if item.role != "prime"]
    metrics, details = figures(cfg, launched, priming)
    # a float8 row: its layers; emulated, no speed, speedup, break-even or verdict
    metrics, details = fp8.withhold({**metrics, **fp8.of_worker(launched[0]["metrics"])}, details)
    return CompileResult({**metrics, "log_dir": str(log_dir)}, details)


def _read(cfg: CompileConfig, item: Launch, out: LaunchResult) -> dict[str, Any]:
    """What the study reads of one launch (a priming launch is a compiled one)."""
    m, d = out.result["metrics"], out.result["details"]
    steps = d["steps_s"]
    return {"side": "eager" if item.role == "eager" else "compiled", "repeat": item.repeat,
            "seed": cfg.seed + item.repeat,
            "samples_per_s": m["samples_per_s"], "step_s": m["global_batch"] / m["samples_per_s"],
            "first_s": sum(steps[:cfg.warmup_steps]), "steps_s": steps,
            "loss_last": m.get("loss_last"), "peak_bytes": m.get("peak_bytes"),
            "launch_s": out.wall_s, "epochs": d["epochs"], "metrics": m,
            **{k: d[k] for k in ("graph_break_reasons", "recompile_reasons",
                                 "compiles_in_window") if k in d}}


def figures(cfg: CompileConfig, launched: list[dict[str, Any]],
            priming: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, details) of a row's launches (`_read`'s dicts): the figures the module
    docstring names, and the first compiled launch's step figures (its timed steps' data
    and compute time and their shares: what diagnose judges a row by)."""
    eager = [x for x in launched if x["side"] == "eager"]
    comp = [x for x in launched if x["side"] == "compiled"]
    eager_first = statistics.median(x["first_s"] for x in eager)
    for x in comp:
        x["compile_s"] = x["first_s"] - eager_first
    batch = comp[0]["metrics"]["global_batch"]
    be = compile_cost.break_even([(x["first_s"], x["samples_per_s"]) for x in comp],
                          [(x["first_s"], x["samples_per_s"]) for x in eager], batch)
    speed = stats.ratio_interval([[x["samples_per_s"]] for x in eager],
                                 [[x["samples_per_s"]] for x in comp])
    n = min(len(eager), len(comp))
    verdict = stats.direction_verdict(speed.low, speed.high, stats.DEFAULT_THRESHOLD, n,
                                      at_boundary=speed.at_boundary)
    first = comp[0]["metrics"]
    keep = ("model_params", "model_class", "model_source_sha", "tokens_per_sample",
            "flops_per_sample", "flops_per_token", "flops_per_token_analytic", "device_name",
            "device_type", "global_batch", "world_size", "threads_per_rank", "peak_kind",
            "graph_breaks", "graphs", "compiled_frames", "timing", *STEP_FIGURES)
    metrics: dict[str, Any] = {k: first[k] for k in keep if k in first}
    metrics.update({
        **stats.summarize([x["samples_per_s"] for x in comp], "samples_per_s"),
        **stats.summarize([x["samples_per_s"] for x in eager], "eager_samples_per_s"),
        **stats.summarize([x["compile_s"] for x in comp], "compile_s"),
        # a steady step: the batch over the median samples/s (what the speedup divides)
        "step_s": batch / statistics.median(x["samples_per_s"] for x in comp),
        "eager_step_s": batch / statistics.median(x["samples_per_s"] for x in eager),
        "first_steps": cfg.warmup_steps,
        "first_steps_s": statistics.median(x["first_s"] for x in comp),
        "eager_first_steps_s": eager_first,
        "speedup": speed.ratio, "speedup_ci95_low": speed.low, "speedup_ci95_high": speed.high,
        "speedup_range_low": speed.range_low, "speedup_range_high": speed.range_high,
        "speedup_verdict": verdict,
        "break_even_steps": be.steps, "break_even_low": be.low, "break_even_high": be.high,
        "break_even_n": be.n, "saved_s_per_step": be.saved_s,
        # a direction only where the speedup's verdict names one (core.compile_cost)
        "pays_off": {"faster": "yes", "slower": "no", "no change": "no"}.get(verdict,
                                                                            "not settled"),
        "recompiles": max(x["metrics"].get("recompiles", 0) for x in comp),
        # a compile inside a launch's timed window is in its steady figure, not its compile_s
        "compiled_in_warmup": all(x["metrics"].get("compiled_in_warmup", True) for x in comp),
        "launches_compiling_in_window": sum(not x["metrics"].get("compiled_in_warmup", True)
                                            for x in comp),
        "compile_in_window_s": max(x["metrics"].get("compile_in_window_s") or 0 for x in comp),
        "compile_cache_note": "; ".join(dict.fromkeys(
            x["metrics"]["compile_cache_note"] for x in comp
            if x["metrics"].get("compile_cache_note"))) or None,
        "compile_remote_caches_off": first.get("compile_remote_caches_off"),
        "cache_hits": statistics.median(x["metrics"].get("cache_hits", 0) for x in comp),
        "cache_misses": statistics.median(x["metrics"].get("cache_misses", 0) for x in comp),
        "loss_last": statistics.median(x["loss_last"] for x in comp),
        "loss_steps": sum(e.get("steps", 0) for e in comp[0]["epochs"]),
        "eager_loss_last": statistics.median(x["loss_last"] for x in eager),
        **compile_cost.loss_parity([x["loss_last"] for x in sorted(eager, key=_by_seed)],
                            [x["loss_last"] for x in sorted(comp, key=_by_seed)]),
        "launches": len(launched),
    })
    peaks = [statistics.median(x["peak_bytes"] for x in side) for side in (comp, eager)
             if all(x["peak_bytes"] for x in side)]
    if len(peaks) == 2:
        metrics.update(peak_bytes=peaks[0], eager_peak_bytes=peaks[1],
                       peak_mem_ratio=peaks[0] / peaks[1])
    if priming is not None:  # the cold compile that filled the warm launches' cache
        metrics["cold_compile_s"] = priming["first_s"] - eager_first
        metrics["cold_cache_misses"] = priming["metrics"].get("cache_misses")
    metrics.update(repeats.token_figures(metrics))
    details = {"launches": [_slim(x) for x in comp], "eager_launches": [_slim(x) for x in eager],
               "priming": _slim(priming) if priming else None,
               # each compiled launch's epochs, its compile beside them (`compare` reads these)
               "epochs": [{**e, "repeat": x["repeat"], "compile_s": x["compile_s"]}
                          for x in comp for e in x["epochs"]],
               "graph_break_reasons": comp[0].get("graph_break_reasons", []),
               "recompile_reasons": list(dict.fromkeys(
                   r for x in comp for r in x.get("recompile_reasons", []))),
               "compiles_in_window": list(dict.fromkeys(
                   r for x in comp for r in x.get("compiles_in_window", [])))}
    return metrics, details


def break_even_of(m: dict[str, Any]) -> tuple[float, float | None, float | None, int]:
    """(steps, low, high, n) of a record's break-even: a record stores inf as null, so a
    null step count is "never", and a null bound of an interval over MIN_LAUNCHES or more
    launches a side is "never" too (with fewer there is no interval: None)."""
    n = int(m.get("break_even_n") or 0)
    steps = m.get("break_even_steps")
    interval = n >= stats.MIN_LAUNCHES

    def bound(v: Any) -> float | None:
        return float(v) if v is not None and v == v else math.inf if interval else None
    return (math.inf if steps is None or steps != steps else float(steps),
            bound(m.get("break_even_low")), bound(m.get("break_even_high")), n)


def _by_seed(x: dict[str, Any]) -> int:
    return x["seed"]


def _slim(x: dict[str, Any]) -> dict[str, Any]:
    """A launch as its record keeps it: its figures and step times, not the worker's."""
    return {k: v for k, v in x.items() if k not in ("metrics", "epochs")} | {
        k: x["metrics"].get(k) for k in ("cache_hits", "cache_misses", "recompiles")}


def describe(cfg: CompileConfig, result: CompileResult) -> str:
    """The row's answer in three lines: after how many steps it pays off, what the compile
    cost and what it bought, and whether it changed the loss."""
    m = result.metrics
    where = (f"{cfg.model} on {m.get('device_name', cfg.device)}, compile {cfg.compile}, "
             f"{cfg.compile_cache} cache")
    if fp8.emulated_line(m):
        return f"{where}: {fp8.emulated_line(m)}"
    pays = compile_cost.break_even_text(m["break_even_steps"], m["break_even_low"],
                                        m["break_even_high"], m["break_even_n"],
                                        m["speedup_verdict"])
    if m["speedup_ci95_low"] is not None:
        spread = f"95% CI {m['speedup_ci95_low']:.2f}-{m['speedup_ci95_high']:.2f}"
    else:
        spread = f"range {m['speedup_range_low']:.2f}-{m['speedup_range_high']:.2f}"
    cold = (f"; the cold compile that filled its cache {m['cold_compile_s']:.1f} s"
            if m.get("cold_compile_s") is not None else "")
    spread_loss = (f" (the worst pair {m['loss_delta_relative_max']:.2%} apart on the same "
                   f"seed, within {m['loss_tolerance']:.0%} is the same)"
                   if m.get("loss_delta_relative_max") is not None else "")
    late = (f" A compile ran inside the timed window in {m['launches_compiling_in_window']} "
            f"of {m['break_even_n']} compiled launch(es) ({m['compile_in_window_s']:.2f} s at "
            "most): their steady figures include it; more warmup_steps keep it out."
            if not m.get("compiled_in_warmup", True) else "")
    note = f" {m['compile_cache_note']}." if m.get("compile_cache_note") else ""
    return (f"{where}: {pays}.{late}{note}\n"
            f"compile {m['compile_s']:.1f} s (p10 {m['compile_s_p10']:.1f}, p90 "
            f"{m['compile_s_p90']:.1f}){cold}; steady step {m['step_s'] * 1e3:.2f} ms against "
            f"eager's {m['eager_step_s'] * 1e3:.2f} ms: x{m['speedup']:.2f} ({spread}, "
            f"n={m['break_even_n']} launches a side: {m['speedup_verdict']}); "
            f"{m.get('graph_breaks', 0)} graph break(s), {m.get('recompiles', 0)} recompile(s).\n"
            f"loss after {m['loss_steps']} steps {m['loss_last']:.4f} against eager's "
            f"{m['eager_loss_last']:.4f}: {m['loss_parity']}{spread_loss}")
