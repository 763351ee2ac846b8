"""The GPU check's summary: one row per step (status, seconds, the figures that say the
most about it) and its targets' lines, as `summary.md` holds it and the run prints it."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


HEADLINE = {  # the figures a summary row shows, per kind of step
    "doctor": ("ok", "latency_s"), "allreduce": ("algbw_gbps", "busbw_gbps", "latency_s"),
    "calibrate": ("event_over_wall", "event_over_wall_p10", "event_over_wall_p90",
                  "benchlib_over_bare", "extra_us_per_step"),
    "resnet50": ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "launches", "mfu",
                 "target_met", "energy_j_per_sample", "peak_mem_bytes"),
    "jax": ("jax_samples_per_s", "samples_per_s", "samples_per_s_p10", "samples_per_s_p90",
            "compile_s", "jax_backend"),
    "elastic": ("samples_per_s", "restarts", "steps_redone", "recovery_s", "final_step"),
    "lm": ("tokens_per_s", "tokens_per_s_p10", "tokens_per_s_p90", "launches", "mfu", "target_met",
           "peak_alloc_bytes", "peak_reserved_bytes", "flop_count_ratio"),
    "timm": ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "mfu",
             "energy_j_per_sample", "peak_alloc_bytes"),
    "hf": ("tokens_per_s", "tokens_per_s_p10", "tokens_per_s_p90", "mfu", "energy_j_per_sample",
           "peak_alloc_bytes", "flop_count_ratio"),
    "maxbatch": ("boundary", "batches_tried"),
    "compile": ("samples_per_s", "eager_samples_per_s", "speedup", "compile_s", "first_steps_s",
                "break_even", "peak_alloc_bytes"),
    "checkpoint": ("summary", "state_bytes_per_rank"),
    "fp8_layers": ("shapes", "pay", "differ", "fp8"),
    "fp8_ab": ("answer", "compile_s", "bf16_compile_s", "mfu_fp8_weighted"),
    "hta": ("hta_idle_pct", "hta_compute_pct", "hta_non_compute_pct", "hta_overlap_pct",
            "hta_missing"),
    "env": ("gpus", "nvidia_driver", "torch", "torch_cuda", "cudnn", "nccl"),
}


def _io_headline(figures: dict[str, Any]) -> str:
    """`train_w0 9,407 (7,974-10,617)` per setting: samples/s, median (p10-p90) over
    repeats, or over launches (n) in an A/B; then each A/B ratio with its interval."""
    settings = [k[: -len("_samples_per_s")] for k in figures if k.endswith("_samples_per_s")]
    parts = [f"{s} {_fmt(figures[s + '_samples_per_s'])} "
             f"({_fmt(figures[s + '_samples_per_s_p10'])}-"
             f"{_fmt(figures[s + '_samples_per_s_p90'])}"
             + (f", n={figures[s + '_samples_per_s_n']})" if s + "_samples_per_s_n" in figures
                else ")") for s in settings]
    for key in (k for k in figures if k.startswith("ab_") and k + "_verdict" in figures):
        low, high = figures[key + "_low"], figures[key + "_high"]
        parts.append(f"{key[3:].replace('_over_', ' / ', 1)} {figures[key]:.2f}x"
                     + (f" ({low:.2f}-{high:.2f})" if low is not None else "")
                     + f" {figures[key + '_verdict']}")
    return "; ".join(parts)


def _shown(key: str, value: Any) -> str:
    """A headline figure: bytes in GiB, energy that no counter gave as unknown."""
    if value is None:
        return f"{key} unknown (no NVML energy counter read)"
    if key.endswith("_bytes"):
        return f"{key[:-len('_bytes')]} {value / 2**30:,.2f} GiB"
    return f"{key} {_fmt(value)}"


def headline(step: str, figures: dict[str, Any]) -> str:
    if step.startswith("io_"):
        return _io_headline(figures)
    keys = next((v for k, v in HEADLINE.items() if step.startswith(k)),
                ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "backend_used",
                 "strategy", "devices"))
    return ", ".join(_shown(k, figures[k]) for k in keys
                     if figures.get(k) is not None or (k.startswith("energy") and k in figures))


def summary_markdown(outcomes: list[dict[str, Any]], env: dict[str, Any]) -> str:
    gpus = ", ".join(g["name"] for g in env.get("gpus", [])) or "no GPU seen"
    lines = [f"# GPU check: {gpus}", "",
             f"driver {env.get('nvidia_driver')}, CUDA {env.get('torch_cuda')}, cuDNN "
             f"{env.get('cudnn')}, NCCL {env.get('nccl')}, torch "
             f"{env.get('packages', {}).get('torch')}, host {env.get('hostname')}, "
             f"{env.get('cpu_model')}", "",
             "| step | status | s | figures (median, p10, p90 over epochs, rounds or launches) |",
             "|---|---|---|---|"]
    for o in outcomes:
        text = headline(o["step"], o.get("figures") or {}) if o["status"] == "ok" else o.get("error", "")
        lines.append(f"| {o['step']} | {o['status']} | {o.get('seconds', '')} | "
                     f"{text.replace('|', '/')} |")
    ok = sum(o["status"] == "ok" for o in outcomes)
    lines += ["", f"{ok} of {len(outcomes)} steps ok."]
    targets = [f"- {o['step']}: {o['figures']['target']}" for o in outcomes
               if isinstance((o.get("figures") or {}).get("target"), str)]
    lines += ["", "Targets:", *targets] if targets else []
    return "\n".join(lines) + "\n"
