"""Is FP8 worth it for this model: a float8 row's A/B (notebook 50; the GPU check's part
6). A row whose precision is a torchao recipe (fp8_tensorwise, fp8_rowwise,
fp8_rowwise_gw_hp) launches its work `repeats` times in that recipe and `repeats` times in
amp_bf16, the same work otherwise, interleaved (bf16 first in even rounds, FP8 first in
odd ones, so drift falls on both), launch r of each side on seed + r. Its figures, beside
the FP8 side's own (tokens/s, memory, the linears converted and kept with their reasons):

    fp8_speedup       FP8's steady samples/s over bf16's (medians over launches), with a
                      bootstrap 95% interval and the one verdict rule (core.stats: a
                      direction only from 5 or more launches a side)
    compile_s         each side's compile by itself (core.compile_cost.in_launch: a
                      launch's first steps less as many steady ones), apart from the
                      steady step (`step_s`, `bf16_step_s`) the speedup divides
    fp8_loss_parity   the loss after the run's steps, FP8 against bf16 on the same seed:
                      `same` where every pair lies within LOSS_TOLERANCE of bf16's
                      (relative), `differs` otherwise. A stated bound, not the seeds'
                      spread: a linear's output 10% off (a wrong scale) moved gpt-tiny's
                      loss after 8 steps by 7%, FP8's own rounding by 0.1%
    fp8_peak_mem_ratio  FP8's peak memory over bf16's (medians)
    mfu, mfu_fp8_weighted  over the dense bf16 peak, and over the peak the share of FLOPs
                      FP8 runs could reach (core.metrics)

An emulated row (a CPU, a GPU before sm_89) keeps its loss parity and its layers, and
draws no speed, MFU or verdict: `withhold` takes them out of its record, which says
`fp8: emulated` and why.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from benchlib.config.choices import FP8_RECIPES, TOKEN_DATASETS
from benchlib.core import stats
from benchlib.core.metrics import mfu_fp8_weighted
from benchlib.studies.repeats import Launch

BASELINE = "amp_bf16"
LOSS_TOLERANCE = 0.02  # FP8's loss after the run's steps within 2% of bf16's, same seed
# what an FP8 side hands its bf16 twin otherwise than the row holds it (Launch.handed)
BF16_HANDS = {"precision": BASELINE, "fp8_filter": "auto", "fp8_all_gather": False}
# figures of speed: none is drawn from an emulated run
SPEED = ("samples_per_s", "tokens_per_s", "epoch_samples_per_s", "mfu", "fp8_speedup",
         "bf16_samples_per_s", "bf16_tokens_per_s", "step_s", "bf16_step_s", "eager_step_s",
         "eager_samples_per_s", "speedup", "break_even", "pays_off", "jax_over_pytorch",
         "startup_gap", "energy_j_per_sample", "cost_per_million_samples")


def is_fp8(cfg: Any) -> bool:
    return getattr(cfg, "precision", "") in FP8_RECIPES


def ab_launches(cfg: Any, base: Launch) -> list[Launch]:
    """`base` (the row's launch, in its FP8 recipe) `repeats` times a side, bf16's twin
    beside each, interleaved; launch r of each side on seed + r."""
    planned = []
    for r in range(cfg.repeats):
        for side in ("bf16", "fp8") if r % 2 == 0 else ("fp8", "bf16"):
            params = {**base.params, "seed": cfg.seed + r}
            handed = ("seed",) if r else ()
            if side == "bf16":
                params.update(BF16_HANDS)
                handed += tuple(BF16_HANDS)
            planned.append(replace(base, params=params, log=f"{side}-{r}", role=side, repeat=r,
                                   handed=handed))
    return planned


def per_launch(out: Any, seed: int) -> dict[str, Any]:
    """What the A/B reads of one launch (a launch() result)."""
    m = out.result["metrics"]
    return {"seed": seed, "samples_per_s": m["samples_per_s"],
            "step_s": m["global_batch"] / m["samples_per_s"], "loss_last": m.get("loss_last"),
            "peak_bytes": m.get("peak_bytes"), "compile_s": m.get("compile_s"),
            "launch_s": out.wall_s}


def loss_parity(bf16: list[float], fp8: list[float],
                tolerance: float = LOSS_TOLERANCE) -> dict[str, Any]:
    """FP8's loss against bf16's after the same steps on the same seed, pair by pair:
    `same` when every relative difference is within `tolerance`, `differs` when one is
    not, `not judged` with no pair."""
    pairs = [(b, f) for b, f in zip(bf16, fp8) if b is not None and f is not None]
    if not pairs:
        return {"fp8_loss_parity": "not judged", "fp8_loss_tolerance": tolerance}
    rel = [(f - b) / abs(b) for b, f in pairs]
    worst = max(rel, key=abs)
    return {"fp8_loss_parity": "same" if abs(worst) <= tolerance else "differs",
            "fp8_loss_rel_delta_max": worst, "fp8_loss_pairs": len(pairs),
            "fp8_loss_tolerance": tolerance,
            "bf16_loss_last": statistics.median(b for b, _ in pairs)}


def ab_figures(bf16: list[dict[str, Any]], fp8: list[dict[str, Any]]) -> dict[str, Any]:
    """The A/B's figures of the two sides' launches (`per_launch`'s dicts)."""
    speed = stats.ratio_interval([[x["samples_per_s"]] for x in bf16],
                                 [[x["samples_per_s"]] for x in fp8])
    n = min(len(bf16), len(fp8))
    out = {"fp8_speedup": speed.ratio, "fp8_speedup_ci95_low": speed.low,
           "fp8_speedup_ci95_high": speed.high, "fp8_speedup_range_low": speed.range_low,
           "fp8_speedup_range_high": speed.range_high, "fp8_launches": n,
           "fp8_speedup_verdict": stats.direction_verdict(
               speed.low, speed.high, stats.DEFAULT_THRESHOLD, n, at_boundary=speed.at_boundary),
           "bf16_samples_per_s": statistics.median(x["samples_per_s"] for x in bf16),
           "step_s": statistics.median(x["step_s"] for x in fp8),
           "bf16_step_s": statistics.median(x["step_s"] for x in bf16)}
    for name, side in (("compile_s", fp8), ("bf16_compile_s", bf16)):
        known = [x["compile_s"] for x in side if x["compile_s"] is not None]
        out[name] = statistics.median(known) if known else None
    peaks = [statistics.median(x["peak_bytes"] for x in side) for side in (fp8, bf16)
             if all(x["peak_bytes"] for x in side)]
    if len(peaks) == 2:
        out.update(bf16_peak_bytes=peaks[1], fp8_peak_mem_ratio=peaks[0] / peaks[1])
    by_seed = lambda side: [x["loss_last"] for x in sorted(side, key=lambda x: x["seed"])]  # noqa: E731
    return {**out, **loss_parity(by_seed(bf16), by_seed(fp8))}


def figures(m: dict[str, Any], bf16: list[dict[str, Any]],
            fp8: list[dict[str, Any]]) -> dict[str, Any]:
    """The A/B's figures and the FP8 side's MFU over its FP8-weighted peak (its `mfu`,
    over the dense bf16 peak, the study's own)."""
    per_token = m.get("tokens_per_sample")
    out = ab_figures(bf16, fp8)
    if per_token:
        out["bf16_tokens_per_s"] = out["bf16_samples_per_s"] * per_token
    return {**out, **mfu_fp8_weighted(m.get("mfu"), m["device_name"], m.get("fp8_flops_share"))}


def of_worker(m: dict[str, Any]) -> dict[str, Any]:
    """What a worker's metrics say of float8 (`fp8`, `fp8_*`): a study that keeps only
    some of them keeps these."""
    return {k: v for k, v in m.items() if k == "fp8" or k.startswith("fp8_")}


def emulated_line(m: dict[str, Any]) -> str | None:
    """An emulated row's one line in place of its speed (None for any other row)."""
    if m.get("fp8") != "emulated":
        return None
    return (f"{m.get('fp8_why')}; {m.get('fp8_converted', 0)} linears in FP8, "
            f"{m.get('fp8_kept', 0)} kept in bf16")


def withhold(metrics: dict[str, Any], details: dict[str, Any]) -> tuple[dict, dict]:
    """An emulated row's record: no figure of speed (samples/s, tokens/s, MFU, a speedup,
    its verdict, a steady step), in its metrics or its launches' and epochs' details; its
    `fp8_why` says why. A native row as it is."""
    if metrics.get("fp8") != "emulated":
        return metrics, details
    def speedy(key: str) -> bool:  # a figure of SPEED, or one of its spread's (_p10, ...)
        return key in SPEED or key.startswith(tuple(f"{s}_" for s in SPEED))

    def slim(value: Any) -> Any:  # the details' launches and epochs, at any depth
        if isinstance(value, dict):
            return {k: slim(v) for k, v in value.items() if not speedy(k)}
        return [slim(v) for v in value] if isinstance(value, list) else value
    kept = {k: v for k, v in metrics.items() if not speedy(k)}
    return {**kept, "speed_withheld": metrics.get("fp8_why")}, slim(details)


def sentence(m: dict[str, Any], model: str, precision: str) -> str:
    """The row's answer: 'fp8_tensorwise x1.18 (95% CI 1.12-1.25, n=5 launches a side:
    faster) over bf16 for gpt2-350m at 1,024 tokens, loss same (within 2%)'; an emulated
    row says why it has no speed."""
    tokens = m.get("tokens_per_sample")
    where = f"{model}" + (f" at {tokens:,} tokens" if tokens else "")
    loss = f"loss {m.get('fp8_loss_parity', 'not judged')} (within " \
           f"{m.get('fp8_loss_tolerance', LOSS_TOLERANCE):.0%} of bf16's)"
    layers = f"{m.get('fp8_converted', 0)} linears in FP8, {m.get('fp8_kept', 0)} kept in bf16"
    if m.get("fp8") == "emulated":
        return f"{precision} for {where}: no speed ({m.get('fp8_why')}); {loss}; {layers}"
    if m.get("fp8_speedup") is None:
        return f"{precision} for {where}: not measured; {loss}; {layers}"
    n = m["fp8_launches"]
    spread = (f"95% CI {m['fp8_speedup_ci95_low']:.2f}-{m['fp8_speedup_ci95_high']:.2f}"
              if m.get("fp8_speedup_ci95_low") is not None else
              f"range {m['fp8_speedup_range_low']:.2f}-{m['fp8_speedup_range_high']:.2f}")
    return (f"{precision} x{m['fp8_speedup']:.2f} ({spread}, n={n} launches a side: "
            f"{m['fp8_speedup_verdict']}) over bf16 for {where}, {loss}; {layers}")


def layer_table(cfg: Any) -> dict[str, Any] | None:
    """A float8 row's per-layer table at its own model, batch and sequence (trainers/
    fp8_layers.py: only the data's shape matters, so a tokenfile row is timed on tokens
    made on the device), measured in the notebook's kernel before its launches and kept
    where `fp8_filter: measured` reads it; None for any other row."""
    if not is_fp8(cfg):
        return None
    from benchlib.config.fp8_layers import Fp8LayersConfig
    from benchlib.config.performance import compiled
    from benchlib.trainers import fp8_layers

    shape = {"dataset": "tokens"} if cfg.dataset in TOKEN_DATASETS else \
        {"dataset": cfg.dataset, "input_shape": cfg.input_shape, "num_classes": cfg.num_classes}
    layers = Fp8LayersConfig(model=cfg.model, model_args=cfg.model_args, seq_len=cfg.seq_len,
                             vocab_size=cfg.vocab_size if cfg.dataset == "tokens" else 0,
                             batch_size=cfg.batch_size, precision=cfg.precision,
                             device=cfg.device, seed=cfg.seed, compile=compiled(cfg.compile),
                             **shape)
    table = fp8_layers.measure(layers)
    fp8_layers.write(table)
    return table


def ab_rows(details: dict[str, Any]) -> list[dict[str, Any]]:
    """Each launch of the A/B (`details["fp8_ab"]`), side by side: its seed, steady
    samples/s and step (none where emulated), compile seconds, loss and peak memory."""
    return [{"side": side, **x} for side, launched in details.get("fp8_ab", {}).items()
            for x in sorted(launched, key=lambda x: x["seed"])]
