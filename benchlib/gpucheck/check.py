"""`scripts/gpu-check.sh OUT` (`python -m benchlib.gpucheck.check OUT`): every GPU path of the
workbook, run once on a single-GPU machine, in a few minutes, with figures.

GPU time comes rarely and briefly, so this is one prepared command: it generates its
data offline, runs each step as a benchlib CLI or worker subprocess with a time box,
reports a failing step and goes on, and writes into OUT:

    summary.md, summary.json   one row per step: status, seconds, figures, log
    logs/<step>.log            each step's merged stdout and stderr (every launch's)
    results/gpu-check/*.json   a benchlib record per step (the same schema as a sweep's)
    data/                      the generated FashionMNIST (IDX files)

The steps are a table, gpucheck/plan.yaml (read by gpucheck/steps.py), in parts of one
call each (`--part N`, default 1; `--part 2,1` runs part 2, then part 1 while the budget
lasts); within a part they are ordered by what a lease must not miss. A step of several
launches runs each as a fresh process and judges its target over them
(gpucheck/launches.py). `--budget-s` stops starting new steps when the time is spent,
`--only` reruns some by name (from any part).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import atomic
from benchlib.errors import UsageError
from benchlib.gpucheck import launches, steps
from benchlib.gpucheck.steps import STUDY, Step, part_of, plan
from benchlib.gpucheck.summary import headline, summary_markdown
from benchlib.launch import protocol
from benchlib.records import results

BUDGET_S = 540.0  # a call's 600 s, less a machine's start and the files' way back
PARTS = steps.parts()


def _launch(step: Step, log, out: Path) -> int | None:
    """One launch of the step, a fresh process in its own session; None: timed out."""
    if step.config is not None:  # its folder made anew: no checkpoint of an earlier launch
        shutil.rmtree(step.config[0], ignore_errors=True)
        protocol.write_run_config(*step.config)
    if step.result is not None:
        Path(step.result).unlink(missing_ok=True)
    proc = subprocess.Popen(step.argv, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=out)
    try:
        return proc.wait(step.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        return None


# an exception's last line (`KeyError: <class 'type'>`, `torch.OutOfMemoryError: ...`)
_RAISED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)")
# where torchrun's agent starts its report of a failed worker (it says only that one
# failed, and where to look)
_AGENT_REPORT = re.compile(r"elastic/multiprocessing/api\.py:\d+\] failed|ChildFailedError")


def why_failed(log: str) -> str:
    """A failed step's reason in one line, from the end of what its processes printed
    before torchrun's report, if any: the exception there, or those last three lines (an
    exception further up, a crash a retry got past, is not the reason)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    report = next((i for i, ln in enumerate(lines) if _AGENT_REPORT.search(ln)), len(lines))
    tail = (lines[:report] or lines)[-3:]
    raised = [ln for ln in tail if _RAISED.match(ln)]
    return raised[-1][:600] if raised else " | ".join(tail)[-600:]


def run_step(step: Step, out: Path, env: dict[str, Any]) -> dict[str, Any]:
    """Runs the step's launches, each in its own time box (never shortened: a launch that
    needs 20 s gets them), one after another until one fails; reads its figures."""
    log = out / "logs" / f"{step.name}.log"
    started_at, start = results.now(), time.monotonic()
    code, found, seconds = 0, [], []
    with open(log, "w") as f:
        for n in range(step.launches):
            if step.launches > 1:
                f.write(f"== launch {n + 1} of {step.launches} ==\n")
                f.flush()
            began = time.monotonic()
            code = _launch(step, f, out)
            seconds.append(time.monotonic() - began)
            if step.result is not None and Path(step.result).exists():
                found.append(json.loads(Path(step.result).read_text()))
            if code != 0:
                break
    text = log.read_text(errors="replace")
    outcome: dict[str, Any] = {"step": step.name, "seconds": round(time.monotonic() - start, 1),
                               "log": str(log), "command": " ".join(step.argv)}
    if code is None:
        outcome.update(status="timeout", error=f"stopped after {step.timeout_s:.0f} s"
                       + (f" (launch {len(seconds)} of {step.launches})" if step.launches > 1 else ""))
    elif code != 0:
        outcome.update(status="failed", error=f"exit {code}: {why_failed(text)}")
    else:
        outcome["status"] = "ok"
    try:
        outcome["figures"] = _figures(step, text, found, seconds, env)
    except Exception as e:  # noqa: BLE001 - a figure we cannot read is reported, not fatal
        if outcome["status"] == "ok":  # a step that failed keeps its own reason
            outcome.update(status="failed", error=f"figures unreadable: {type(e).__name__}: {e}")
    if step.result is not None and outcome["status"] == "ok" and not outcome.get("figures"):
        outcome.update(status="failed", error=f"exit 0 but no result in {step.result}")
    _record(step, outcome, out, env, started_at, found)
    return outcome


def _figures(step: Step, text: str, found: list[dict[str, Any]], seconds: list[float],
             env: dict[str, Any]) -> dict[str, Any] | None:
    """The step's figures: from its output, or from its launches' results (combined over
    launches, its target judged on each launch's), or the environment it printed."""
    if step.family == "env":
        env.update(json.loads(text[text.index("{"):]))
        figures = {k: env.get(k) for k in ("nvidia_driver", "torch_cuda", "cudnn", "nccl")}
        return {**figures, "gpus": [g["name"] for g in env.get("gpus", [])],
                "torch": env.get("packages", {}).get("torch")}
    if step.from_log is not None:
        return step.from_log(text)
    if not found:
        return None
    figures = step.figures(found[0] if step.launches == 1 else launches.combined(found, seconds))
    if step.target is not None:
        figures.update(launches.judged(step.target, [step.figures(r) for r in found], figures,
                                       step.source.precision, step.launches))
    return figures


def _record(step: Step, outcome: dict[str, Any], out: Path, env: dict[str, Any],
            started_at: str, found: list[dict[str, Any]]) -> None:
    """The step's record, under an id no ok record has (results.free_run_id); its id and
    its `notebook` from one name, `gpu-check <step>`."""
    params, notebook = {"step": step.name, **step.params}, f"gpu-check {step.name}"
    per_launch = [r.get("metrics", {}).get("samples_per_s") for r in found]
    record = results.make_record(
        run_id=results.run_id_for(STUDY, notebook, params), table=STUDY, notebook=notebook,
        params=params, env=env, started_at=started_at,
        status="ok" if outcome["status"] == "ok" else "failed",
        metrics={k: v for k, v in (outcome.get("figures") or {}).items() if k not in params},
        details={"command": outcome["command"], "log": outcome["log"],
                 "error": outcome.get("error"),
                 **({"launches_samples_per_s": per_launch} if step.launches > 1 else {})})
    record["run_id"] = results.free_run_id(out / "results", STUDY, record["run_id"],
                                           record["label"])
    results.write_record(out / "results", record)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="folder for the records, logs and summary")
    p.add_argument("--dry-run", action="store_true", help="print the plan; run nothing")
    p.add_argument("--budget-s", type=float, default=BUDGET_S,
                   help="start a step only while its expected time (measured on one H100 or H200, "
                   "or estimated: --dry-run says which) fits in what is left of this many "
                   f"seconds (default {BUDGET_S:.0f}: a part, within one 10-minute call)")
    p.add_argument("--part", default="1",
                   help=f"which of the {len(PARTS)} parts to run, each one call ("
                   + "; ".join(f"{n}: {what}" for n, what in PARTS.items())
                   + "); several in the order given, the later ones while the budget lasts "
                   "(2,1)")
    p.add_argument("--only", help="comma-separated step names (or prefixes) to run, from "
                   "any part")
    return p


def parts_of(text: str) -> list[int]:
    """`--part 2` or `--part 2,1` (part 2, then part 1 while the budget lasts)."""
    try:
        chosen = [int(p) for p in text.split(",")]
    except ValueError:
        chosen = []
    if not chosen or any(p not in PARTS for p in chosen) or len(set(chosen)) < len(chosen):
        raise UsageError(f"part: must be 1 to {len(PARTS)}, or several once each in the order "
                         f"to run them (2,1), got {text}")
    return chosen


def select(all_steps: list[Step], only: str | None, part: int | list[int] = 1) -> list[Step]:
    """The steps of `part`, or those `only` names, with env (the records carry it) first;
    a step another needs and that is not chosen runs just before the first that needs it."""
    if not only:
        chosen = part_of(all_steps, part)
    else:
        wanted = [w.strip() for w in only.split(",") if w.strip()]
        names = [s.name for s in all_steps]
        for w in wanted:
            if not any(n.startswith(w) for n in names):
                raise UsageError(f"only: {w!r} matches no step; steps are {', '.join(names)}")
        chosen = [s for s in all_steps if s.part == 0 or any(s.name.startswith(w) for w in wanted)]
    by_name, ordered = {s.name: s for s in all_steps}, []
    for s in chosen:
        ordered += [by_name[n] for n in s.needs if by_name[n] not in chosen + ordered]
        ordered.append(s)
    return ordered


def dry_run(chosen: list[Step], args: argparse.Namespace, parts: list[int]) -> None:
    """The plan: each step's seconds (measured or estimated, and where), box and command."""
    for s in chosen:
        box = f"box {s.timeout_s:3.0f} s" + (" a launch" if s.launches > 1 else "")
        print(f"{s.name:30} ~{s.expected_s:3.0f} s ({box})  {' '.join(s.argv)}")
        print(f"{'':30} seconds: {s.timed}")
        if s.config is not None:
            print(f"{'':30} run.json params: {json.dumps(s.config[2], sort_keys=True)}")
    expected = sum(s.expected_s for s in chosen)
    estimated = sum(s.estimated_s for s in chosen)
    which = "" if args.only else (f" (part {args.part} of {len(PARTS)})" if len(parts) == 1
                                  else f" (parts {args.part} in that order)")
    print(f"{len(chosen)} steps{which}, about {expected:.0f} s: {expected - estimated:.0f} s as "
          f"measured, {estimated:.0f} s estimated (docs/gpus.md); a step starts only while its "
          f"expected time fits in the {args.budget_s:.0f} s budget")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        out = Path(args.out).resolve()
        chosen_parts = parts_of(args.part)
        if args.budget_s <= 0:
            raise UsageError(f"budget_s: must be > 0, got {args.budget_s}")
        if not args.dry_run:
            import torch

            if not torch.cuda.is_available():
                raise UsageError("device: no CUDA device here; the GPU check needs one "
                                 "(--dry-run prints the plan anywhere)")
        chosen = select(plan(out), args.only, chosen_parts)
        if args.dry_run:
            dry_run(chosen, args, chosen_parts)
            return 0
    except UsageError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    outcomes = run_plan(chosen, out, args.budget_s)
    return 0 if all(o["status"] == "ok" for o in outcomes) else 1


def run_plan(chosen: list[Step], out: Path, budget_s: float) -> list[dict[str, Any]]:
    """Runs the steps in order, each only while its expected time fits in what is left of
    the budget (a step that does not fit is skipped, never started and cut short) and
    the steps it needs ran ok, and writes the summary."""
    for folder in ("logs", "work", "results"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    start, env, outcomes = time.monotonic(), {}, []
    for step in chosen:
        left = budget_s - (time.monotonic() - start)
        unmet = [o for o in outcomes if o["step"] in step.needs and o["status"] != "ok"]
        if unmet:  # it reads their outputs (a compile cache, an eager baseline)
            outcomes.append({"step": step.name, "status": "skipped",
                             "error": f"needs {unmet[0]['step']}, which "
                                      + {"skipped": "was skipped", "timeout": "timed out"}
                                      .get(unmet[0]["status"], unmet[0]["status"])})
            continue
        if step.expected_s > left:
            outcomes.append({"step": step.name, "status": "skipped",
                             "error": f"out of time: needs about {step.expected_s:.0f} s, "
                                      f"{max(left, 0):.0f} s of the {budget_s:.0f} s budget left"})
            continue
        outcome = run_step(step, out, env)
        outcomes.append(outcome)
        said = (headline(step.name, outcome.get("figures") or {})
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
