"""The GPU check's figures, one function per family of steps (plan.yaml's `figures`):
from a step's result file (FIGURES, each given the step's study config) or from its own
output (FROM_LOG). MFU only through the one MFU function, core.metrics.mfu."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchlib import reference
from benchlib.core.metrics import mfu
from benchlib.records import results
from benchlib.studies import repeats, transformer_training

MFU_FORMULA = "6N + 12·L·H·Q·T FLOPs per token (PaLM, appendix B)"


def metrics(result: dict[str, Any], cfg: Any = None) -> dict[str, Any]:
    """A worker's metrics as it reported them (doctor, allreduce, the trainers, JAX)."""
    return dict(result["metrics"])


def _calibrate(result: dict[str, Any], cfg: Any = None) -> dict[str, Any]:
    """benchlib's loop against a bare loop, its clock against a synchronized wall clock."""
    loop, clock = result["loop"], result["clock"]
    return {**{f"benchlib_over_bare{q}": loop[f"ratio{q}"] for q in ("", "_p10", "_p90")},
            **{k: loop[k] for k in ("extra_us_per_step", "bare_samples_per_s")},
            **{k: clock[k] for k in ("event_over_wall", "event_over_wall_p10",
                                     "event_over_wall_p90", "reported_samples_per_s")},
            "event_within_2pct": abs(clock["event_over_wall"] - 1) <= 0.02}


def _framework(result: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """Notebook 40's figures: samples/s (tokens/s for token data), MFU by the counted
    FLOPs per sample over the device's dense peak for the row's precision."""
    m = dict(result["metrics"])
    m.update(repeats.token_figures(m))
    m["mfu"], m["mfu_peak_source"] = mfu(m["samples_per_s"], m.get("world_size", 1),
                                         m.get("flops_per_sample"), m["device_name"],
                                         cfg.precision)
    return m


def _lm(result: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """Notebook 50's figures: tokens/s, MFU by the analytic count (its formula and the
    peak it is taken over), the two FLOP counts."""
    m = dict(result["metrics"])
    m.update(repeats.token_figures(m))
    m.update(transformer_training.lm_figures(m, cfg.precision))
    peak = reference.peak_flops(m["device_name"], cfg.precision)
    return {**m, "mfu_formula": MFU_FORMULA, "mfu_peak_flops": peak[0] if peak else None}


def _ab(s: dict[str, Any], cfg: Any = None) -> dict[str, Any]:
    """The IO A/B's summary, flat: each setting's median and spread over launches, and
    each ratio with its interval and verdict."""
    figures: dict[str, Any] = {}
    for name, m in s["settings"].items():
        figures.update({f"{name}_{k}": m[k] for k in ("samples_per_s", "samples_per_s_p10",
                                                      "samples_per_s_p90", "samples_per_s_n")})
    for a in s["ab"]:
        key = f"ab_{a['new']}_over_{a['base']}_{a['setting']}"
        figures.update({key: a["ratio"], f"{key}_low": a["low"], f"{key}_high": a["high"],
                        f"{key}_verdict": a["verdict"]})
    return figures


IO_FIGURES = ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "epoch_s", "data_s",
              "compute_s")


def _printed_records(log: str) -> list[dict[str, Any]]:
    """The records a benchlib CLI names in its output (`record: PATH` lines)."""
    return [results.read_record(Path(line[len("record: "):])) for line in log.splitlines()
            if line.startswith("record: ")]


def io_figures(log: str) -> dict[str, Any]:
    """Each `benchlib io` run prints `record: PATH`; its metrics are the figures, keyed by
    the setting: `train_w4_samples_per_s` for mode train with 4 workers."""
    figures: dict[str, Any] = {}
    for record in _printed_records(log):
        setting = f"{record['params']['mode']}_w{record['params']['num_workers']}"
        figures.update({f"{setting}_{k}": record["metrics"].get(k) for k in IO_FIGURES})
        figures["device_name"] = record["metrics"].get("device_name")
    return figures


def maxbatch_figures(log: str) -> dict[str, Any]:
    """The record `benchlib maxbatch` prints: the boundary and the batches tried."""
    (record,) = _printed_records(log)
    return record["metrics"]


def hta_figures(log: str) -> dict[str, Any]:
    """Rank 0's figures from the JSON `python -m benchlib.diagnose.traces` prints last (HTA's
    temporal breakdown and comm/comp overlap, percent), or why HTA did not run."""
    found = json.loads(next(line for line in reversed(log.splitlines()) if line.startswith("{")))
    if "missing" in found:
        return {"hta_missing": found["missing"]}
    return {f"hta_{k}": v for k, v in found["ranks"][0].items() if k != "rank"}


_HOOK_LAUNCH = re.compile(r"launch \d+: median step without the hook ([\d.]+) ms, with "
                         r"([\d.]+) ms; paired ratio with/without ([\d.]+)")
_HOOK_VERDICT = re.compile(r"paired, with/without: ([\d.]+) \((?:95% CI|range) ([\d.]+)-([\d.]+), "
                          r"n=(\d+) launches\); verdict at a 2% threshold: (.+)$")


def comm_hook_figures(log: str) -> dict[str, Any]:
    """scripts/comm_hook_ab.py's lines (issue 38 item 7): each launch's median step without
    and with the comm hook, and the paired speed ratio with its interval and verdict."""
    launches = [m.groups() for m in map(_HOOK_LAUNCH.search, log.splitlines()) if m]
    paired = next(m.groups() for m in map(_HOOK_VERDICT.search, log.splitlines()) if m)
    return {"plain_step_ms": [float(a) for a, _, _ in launches],
            "hooked_step_ms": [float(b) for _, b, _ in launches],
            "paired_speed_ratio": float(paired[0]), "paired_low": float(paired[1]),
            "paired_high": float(paired[2]), "launches": int(paired[3]),
            "verdict": paired[4]}


def _first_s(result: dict[str, Any], warmup: int) -> float:
    """A launch's first `warmup` steps' seconds (where a compile happens)."""
    return sum(result["details"]["steps_s"][:warmup])


def _compile_eager(result: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """Notebook 55's eager side: its metrics and its first steps' seconds."""
    return {**result["metrics"], "first_steps_s": _first_s(result, cfg.warmup_steps)}


def _compile(result: dict[str, Any], cfg: Any, needed: list[str]) -> dict[str, Any]:
    """A compiled launch of notebook 55 against the eager step it needs (`needed`: that
    step's result file): the compile's seconds (its first steps less eager's), the steady
    speedup and the break-even steps (one launch a side: no interval)."""
    from benchlib.core import compile_cost

    eager = json.loads(Path(needed[0]).read_text())
    m, e, warmup = result["metrics"], eager["metrics"], cfg.warmup_steps
    be = compile_cost.break_even([(_first_s(result, warmup), m["samples_per_s"])],
                          [(_first_s(eager, warmup), e["samples_per_s"])], m["global_batch"])
    return {**m, "first_steps_s": _first_s(result, warmup),
            "eager_first_steps_s": _first_s(eager, warmup), "compile_s": be.compile_s,
            "eager_samples_per_s": e["samples_per_s"],
            "speedup": m["samples_per_s"] / e["samples_per_s"],
            # one launch a side: no verdict, so no direction ("not settled", with n)
            "break_even": compile_cost.break_even_text(be.steps, None, None, 1, "inconclusive"),
            "break_even_steps": be.steps}


def _fp8_layers(table: dict[str, Any], cfg: Any = None) -> dict[str, Any]:
    """`benchlib fp8-layers`' table (trainers/fp8_layers.py), flat: each shape's speedup
    with its interval and decision, torchao's static choice, and where the two differ."""
    figures: dict[str, Any] = {k: table[k] for k in ("model", "batch_size", "seq_len",
                                                      "precision", "device_name", "fp8")}
    for row in table["rows"]:
        figures.update({f"{row['shape']}_{k}": row[k] for k in ("speedup", "low", "high",
                                                                "decision", "torchao")})
    figures["shapes"] = len(table["rows"])
    figures["pay"] = [r["shape"] for r in table["rows"] if r["pays"]]
    figures["differ"] = [r["shape"] for r in table["rows"] if r["differs"]]
    return figures


FP8_AB = ("answer", "fp8", "fp8_speedup", "fp8_speedup_ci95_low", "fp8_speedup_ci95_high",
          "fp8_speedup_range_low", "fp8_speedup_range_high", "fp8_speedup_verdict",
          "fp8_launches", "step_s", "bf16_step_s", "compile_s", "bf16_compile_s",
          "fp8_loss_parity", "fp8_loss_rel_delta_max", "fp8_peak_mem_ratio", "fp8_converted",
          "fp8_kept", "fp8_flops_share", "mfu", "mfu_peak_source", "mfu_fp8_weighted",
          "mfu_fp8_weighted_peak_source", "tokens_per_s", "bf16_tokens_per_s", "device_name")


def _fp8_ab(result: dict[str, Any], cfg: Any = None) -> dict[str, Any]:
    """Notebook 50's float8 row (gpucheck/fp8_ab.py): the A/B's figures."""
    return {k: result["metrics"].get(k) for k in FP8_AB}


FIGURES = {"metrics": metrics, "calibrate": _calibrate, "framework": _framework, "lm": _lm,
           "io_ab": _ab, "compile_eager": _compile_eager, "compile": _compile,
           "fp8_layers": _fp8_layers, "fp8_ab": _fp8_ab}
# families whose function also reads the result files of the steps the row `needs`
READS_NEEDED = {"compile"}
FROM_LOG = {"io": io_figures, "maxbatch": maxbatch_figures, "hta": hta_figures,
            "comm_hook": comm_hook_figures}
