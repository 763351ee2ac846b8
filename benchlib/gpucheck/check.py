"""`scripts/gpu-check.sh OUT` (`python -m benchlib.gpucheck.check OUT`): every GPU path of the
workbook, run once on a single-GPU machine, in a few minutes, with figures.

GPU time comes rarely and briefly, so this is one prepared command: it generates its
data offline, runs each step as a benchlib CLI or worker subprocess with a time box,
reports a failing step and goes on, and writes into OUT:

    summary.md, summary.json   one row per step: status, seconds, figures, log
    logs/<step>.log            each step's merged stdout and stderr
    results/gpu-check/*.json   a benchlib record per step (the same schema as a sweep's)
    data/                      the generated FashionMNIST (IDX files)

The steps themselves (commands, time boxes, figures) are in gpucheck/steps.py. They fill
three calls (`--part 1`, the default: the workbook's GPU paths; `--part 2`: the language
model, timm and transformers models, the largest batch; `--part 3`: torch.compile cold and
warm for ResNet-50 and gpt2-124m, gpucheck/compile_steps.py); within a part they are ordered
by what a lease must not miss. `--budget-s` stops starting new ones when the time is
spent, `--only` reruns some by name (from either part).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import atomic
from benchlib.errors import UsageError
from benchlib.gpucheck.compile_steps import ESTIMATED
from benchlib.gpucheck.steps import PARTS, STUDY, Step, part_of, plan
from benchlib.gpucheck.steps import io_figures as _io_figures  # noqa: F401 - the tests' name
from benchlib.launch import protocol
from benchlib.records import results

BUDGET_S = 540.0  # a part: ~507 s (part 1) on the slower H100 host seen, ~478 s (part 2) on an H200
def run_step(step: Step, out: Path, env: dict[str, Any]) -> dict[str, Any]:
    """Runs one step in its own time box (never shortened: a step that needs 20 s gets them)."""
    log = out / "logs" / f"{step.name}.log"
    timeout = step.timeout_s
    if step.config is not None:  # its folder made anew: no checkpoint of an earlier check
        shutil.rmtree(step.config[0], ignore_errors=True)
        protocol.write_run_config(*step.config)
    started_at, start = results.now(), time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(step.argv, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=out)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            code = None
    seconds = time.monotonic() - start
    text = log.read_text(errors="replace")
    outcome: dict[str, Any] = {"step": step.name, "seconds": round(seconds, 1), "log": str(log),
                               "command": " ".join(step.argv)}
    if code is None:
        outcome.update(status="timeout", error=f"stopped after {timeout:.0f} s")
    elif code != 0:
        tail = [ln for ln in text.splitlines() if ln.strip()][-3:]
        outcome.update(status="failed", error=f"exit {code}: " + " | ".join(tail)[-600:])
    else:
        outcome["status"] = "ok"
    try:
        if step.from_log is not None:
            outcome["figures"] = step.from_log(text)
        elif step.name == "env":
            env.update(json.loads(text[text.index("{"):]))
            outcome["figures"] = {k: env.get(k) for k in ("nvidia_driver", "torch_cuda", "cudnn", "nccl")}
            outcome["figures"]["gpus"] = [g["name"] for g in env.get("gpus", [])]
            outcome["figures"]["torch"] = env.get("packages", {}).get("torch")
        elif step.result and Path(step.result).exists():
            outcome["figures"] = step.figures(json.loads(Path(step.result).read_text()))
    except Exception as e:  # noqa: BLE001 - a figure we cannot read is reported, not fatal
        if outcome["status"] == "ok":  # a step that failed keeps its own reason
            outcome.update(status="failed", error=f"figures unreadable: {type(e).__name__}: {e}")
    if step.result is not None and outcome["status"] == "ok" and not outcome.get("figures"):
        outcome.update(status="failed", error=f"exit 0 but no result in {step.result}")
    params = {"step": step.name, **step.params}
    record = results.make_record(run_id=results.run_id_for(STUDY, step.name, step.params),
                                 table=STUDY, notebook=f"gpu-check {step.name}", params=params,
                                 env=env, started_at=started_at,
                                 status="ok" if outcome["status"] == "ok" else "failed",
                                 metrics={k: v for k, v in (outcome.get("figures") or {}).items()
                                          if k not in params},
                                 details={"command": outcome["command"], "log": str(log),
                                          "error": outcome.get("error")})
    results.write_record(out / "results", record)
    return outcome


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


HEADLINE = {  # the figures a summary row shows, per kind of step
    "doctor": ("ok", "latency_s"), "allreduce": ("algbw_gbps", "busbw_gbps", "latency_s"),
    "calibrate": ("event_over_wall", "event_over_wall_p10", "event_over_wall_p90",
                  "benchlib_over_bare", "extra_us_per_step"),
    "resnet50": ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "mfu", "target_met",
                 "energy_j_per_sample", "peak_mem_bytes"),
    "jax": ("jax_samples_per_s", "samples_per_s", "samples_per_s_p10", "samples_per_s_p90",
            "compile_s", "jax_backend"),
    "elastic": ("samples_per_s", "restarts", "steps_redone", "recovery_s", "final_step"),
    "lm": ("tokens_per_s", "tokens_per_s_p10", "tokens_per_s_p90", "mfu", "target_met",
           "peak_alloc_bytes", "peak_reserved_bytes", "flop_count_ratio"),
    "timm": ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "mfu",
             "energy_j_per_sample", "peak_alloc_bytes"),
    "hf": ("tokens_per_s", "tokens_per_s_p10", "tokens_per_s_p90", "mfu", "energy_j_per_sample",
           "peak_alloc_bytes", "flop_count_ratio"),
    "maxbatch": ("boundary", "batches_tried"),
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


def _headline(step: str, figures: dict[str, Any]) -> str:
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
             "| step | status | s | figures (median, p10, p90 over epochs or rounds) |",
             "|---|---|---|---|"]
    for o in outcomes:
        text = _headline(o["step"], o.get("figures") or {}) if o["status"] == "ok" else o.get("error", "")
        lines.append(f"| {o['step']} | {o['status']} | {o.get('seconds', '')} | "
                     f"{text.replace('|', '/')} |")
    ok = sum(o["status"] == "ok" for o in outcomes)
    lines += ["", f"{ok} of {len(outcomes)} steps ok."]
    targets = [f"- {o['step']}: {o['figures']['target']}" for o in outcomes
               if isinstance((o.get("figures") or {}).get("target"), str)]
    lines += ["", "Targets:", *targets] if targets else []
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="folder for the records, logs and summary")
    p.add_argument("--dry-run", action="store_true", help="print the plan; run nothing")
    p.add_argument("--budget-s", type=float, default=BUDGET_S,
                   help="start a step only while its expected time (measured on one H100 or H200) "
                   f"fits in what is left of this many seconds (default {BUDGET_S:.0f}: every "
                   "step, within one 10-minute call)")
    p.add_argument("--part", default="1",
                   help=f"which of the {PARTS} parts to run, each one call (default 1: the "
                   "workbook's GPU paths; 2: the language model, timm and transformers "
                   "models, traces, the largest batch; 3: torch.compile cold and warm); "
                   "2,1: part 2, then part 1's steps "
                   "while the budget lasts")
    p.add_argument("--only", help="comma-separated step names (or prefixes) to run, from "
                   "either part")
    return p


def parts_of(text: str) -> list[int]:
    """`--part 2` or `--part 2,1` (part 2, then part 1 while the budget lasts)."""
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if not parts or any(not 1 <= p <= PARTS for p in parts) or len(set(parts)) < len(parts):
        raise UsageError(f"part: must be 1 to {PARTS}, or several once each in the order to "
                         f"run them (2,1), got {text}")
    return parts


def select(steps: list[Step], only: str | None, part: int | list[int] = 1) -> list[Step]:
    if not only:
        return part_of(steps, part)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    names = [s.name for s in steps]
    for w in wanted:
        if not any(n.startswith(w) for n in names):
            raise UsageError(f"only: {w!r} matches no step; steps are {', '.join(names)}")
    chosen = [s for s in steps if any(s.name.startswith(w) for w in wanted)]
    # env is always read (the records carry it), data when a step needs it
    needs_data = any(s.name.startswith("io_") for s in chosen)
    return [s for s in steps if s in chosen or s.name == "env" or (s.name == "data" and needs_data)]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        out = Path(args.out).resolve()
        parts = parts_of(args.part)
        steps = select(plan(out), args.only, parts)
        if args.budget_s <= 0:
            raise UsageError(f"budget_s: must be > 0, got {args.budget_s}")
        if args.dry_run:
            for s in steps:
                print(f"{s.name:30} ~{s.expected_s:3.0f} s (box {s.timeout_s:3.0f} s)  "
                      f"{' '.join(s.argv)}")
                if s.config is not None:
                    print(f"{'':30} run.json params: {json.dumps(s.config[2], sort_keys=True)}")
            expected = sum(s.expected_s for s in steps)
            which = "" if args.only else (
                f" (part {args.part} of {PARTS})" if len(parts) == 1
                else f" (parts {args.part} in that order)")
            guessed = [s.name for s in steps if s.name in ESTIMATED]
            print(f"{len(steps)} steps{which}, about {expected:.0f} s as measured (docs/gpus.md)"
                  + (f", {len(guessed)} of them estimated, not yet measured ("
                     f"{', '.join(guessed)})" if guessed else "")
                  + f"; a step starts only while its expected time fits in the "
                  f"{args.budget_s:.0f} s budget")
            return 0
        import torch

        if not torch.cuda.is_available():
            raise UsageError("device: no CUDA device here; the GPU check needs one "
                             "(--dry-run prints the plan anywhere)")
    except UsageError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    outcomes = run_plan(steps, out, args.budget_s)
    return 0 if all(o["status"] == "ok" for o in outcomes) else 1


def run_plan(steps: list[Step], out: Path, budget_s: float) -> list[dict[str, Any]]:
    """Runs the steps in order, each only while its expected time fits in what is left of
    the budget (a step that does not fit is skipped, never started and cut short), and
    writes the summary."""
    for folder in ("logs", "work", "results"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    start, env, outcomes = time.monotonic(), {}, []
    for step in steps:
        left = budget_s - (time.monotonic() - start)
        if step.expected_s > left:
            outcomes.append({"step": step.name, "status": "skipped",
                             "error": f"out of time: needs about {step.expected_s:.0f} s, "
                                      f"{max(left, 0):.0f} s of the {budget_s:.0f} s budget left"})
            continue
        outcome = run_step(step, out, env)
        outcomes.append(outcome)
        said = (_headline(step.name, outcome.get("figures") or {})
                if outcome["status"] == "ok" else outcome.get("error"))
        print(f"{outcome['status']:8} {step.name:30} {outcome['seconds']:6.1f} s  {said}",
              flush=True)
    atomic.write_json(out / "summary.json", {"env": env, "steps": outcomes,
                                             "total_s": round(time.monotonic() - start, 1)})
    markdown = summary_markdown(outcomes, env)
    (out / "summary.md").write_text(markdown)
    print(markdown)
    return outcomes


if __name__ == "__main__":
    raise SystemExit(main())
