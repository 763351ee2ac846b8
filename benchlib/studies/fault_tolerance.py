"""The fault-tolerance study (notebook 35, seed 001): an elastic run under torchrun with
`--max-restarts`, one rank killed on purpose after step `fail_at_step`; torchrun restarts
the ranks, they resume from the newest checkpoint and finish. Optionally the same run
without the failure, so the final losses can be compared (with fixed seeds and no loader
workers they are equal: data order, RNG states and the optimizer all resume exactly).

Checkpoints are saved in the mode `checkpoint` names (torch.save, DCP, async DCP), each
launch's in a folder of its own under `checkpoint_path`; the record says what a save and a
restore cost, and, for the cluster's `mtbf`, the save interval that maximises goodput
(Daly's, benchlib.core.goodput) and the goodput at it and at the run's own interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchlib import paths
from benchlib.config import FaultToleranceConfig
from benchlib.config.checkpoint import CheckpointConfig, parse_duration
from benchlib.config.fault_injection import FaultInjectionConfig
from benchlib.core import goodput
from benchlib.core.metrics import without_params
from benchlib.studies import checks, repeats, training
from benchlib.studies.repeats import Launch


@dataclass
class FaultResult:
    metrics: dict[str, Any]
    details: dict[str, Any]


def launches(cfg: FaultToleranceConfig, run_id: str = "interactive") -> list[Launch]:
    """The elastic worker under torchrun with `max_restarts`, one rank killed on purpose
    (`interrupted`); then, where asked, the same run without the failure (`uninterrupted`).
    Each launch's logs under `<its name>/logs` of the row's folder, its checkpoints in
    `<checkpoint_path>/<run_id>/<its name>`, emptied before it starts (a fresh run, not a
    resume of the last one)."""
    runs = [("interrupted", True)] + ([("uninterrupted", False)] if cfg.compare_uninterrupted
                                       else [])
    planned = []
    for name, fail in runs:
        checkpoints = str(paths.resolve(cfg.checkpoint_path) / run_id / name)
        planned.append(Launch("elastic", _worker_params(cfg, checkpoints, fail), "torchrun",
                              cfg.nproc_per_node, timeout_s=cfg.timeout_s, log=f"{name}/logs",
                              role=name, options={"max_restarts": cfg.max_restarts},
                              fresh=checkpoints,
                              handed=("checkpoint_path",) if fail else
                              ("checkpoint_path", "fail_at_step")))
    return planned


def _worker_params(cfg: FaultToleranceConfig, checkpoints: str, fail: bool) -> dict[str, Any]:
    """The elastic worker's parameters (its run.json): the training fields, the faults to
    inject and how to checkpoint (benchlib.studies.training), the cosine schedule, and
    `checkpoints`, this launch's own folder; dummy data (random images, no folder) as many
    as the steps take; without `fail`, no rank is killed (the uninterrupted run)."""
    params = {**training.worker_params(cfg), **training.piece_params(cfg, FaultInjectionConfig),
              **training.piece_params(cfg, CheckpointConfig), "lr_schedule": "cosine",
              "checkpoint_path": checkpoints, "resume_or_start": True}
    if cfg.dataset == "dummy":
        params["dummy_size"] = cfg.batch_size * cfg.nproc_per_node * max(cfg.max_steps, 1)
    if not fail:
        params["fail_at_step"] = 0
    return params


def how_often(cfg: FaultToleranceConfig, m: dict[str, Any]) -> dict[str, Any]:
    """For the cluster's MTBF (`mtbf`), from what this run measured (benchlib.core.goodput's
    `record_inputs`: C, R, an asynchronous save's time to durable, the run's own interval):
    Daly's interval, the exact goodput at it and at the run's own, and what each input was."""
    found = goodput.record_inputs(m, cfg.checkpoint_every)
    (cost, cost_how), (restart, _) = found["cost"], found["restart"]
    if not cost:
        return {}
    mtbf = parse_duration("mtbf", cfg.mtbf)
    plan = goodput.plan(cost, mtbf, restart or 0.0, found["own"][0], found["durable"][0] or 0.0)
    return {**plan, "mtbf_s": mtbf, "checkpoint_cost_s": cost, "checkpoint_cost_how": cost_how,
            "restart_cost_s": restart or 0.0,
            "restart_cost_how": goodput.RESTART_MEASURED if restart else "no restart measured: 0"}


def preflight(cfg: FaultToleranceConfig) -> None:
    """Where the row runs: the device, one rank per device, the data prepared."""
    cuda = checks.device_and_backend(cfg.device, "auto")
    checks.ranks_fit("nproc_per_node", cfg.nproc_per_node, cuda)
    if cfg.dataset != "dummy":  # dummy images: each rank checks its model before it joins
        checks.data_prepared(cfg.path, cfg.dataset)
        checks.own_code_trains(cfg)


def run(cfg: FaultToleranceConfig, run_id: str = "interactive") -> FaultResult:
    preflight(cfg)
    root, planned = repeats.row_logs(run_id), launches(cfg, run_id)
    done = repeats.launch_all(planned, root)
    faulty = repeats.of_role(planned, done, "interrupted")[0]
    metrics = {**without_params(faulty.result["metrics"], cfg), "launch_s": faulty.wall_s,
               "log_dir": str(root)}
    metrics.update(how_often(cfg, metrics))
    details = {"timeline": faulty.result["details"]["timeline"],
               "restarts": faulty.result["details"]["restarts"]}
    for clean in repeats.of_role(planned, done, "uninterrupted"):
        metrics["loss_last_uninterrupted"] = clean.result["metrics"]["loss_last"]
        metrics["loss_diff"] = abs(metrics["loss_last"] - clean.result["metrics"]["loss_last"])
        details["timeline_uninterrupted"] = clean.result["details"]["timeline"]
    return FaultResult(metrics, details)


def steps_over_time(result: FaultResult):
    """One row per step: seconds since the run started, global step, attempt, loss; and
    which run (interrupted or not) it belongs to. What the timeline plot shows."""
    import pandas as pd

    frames = []
    for name, key in (("interrupted", "timeline"), ("uninterrupted", "timeline_uninterrupted")):
        events = pd.DataFrame(result.details.get(key, []))
        if events.empty:
            continue
        steps = events[events["event"] == "step"].copy()
        steps["t_s"] = steps["t"] - events["t"].min()
        frames.append(steps.assign(run=name)[["run", "attempt", "t_s", "step", "loss"]])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def checkpoint_costs(result: FaultResult):
    """What the saves and the restore cost, one row per figure: its median, p10, p90, and
    how many values."""
    import pandas as pd

    m, rows = result.metrics, []
    for name, what in (("checkpoint_blocking_s", "training stalled by a save (s)"),
                       ("checkpoint_total_s", "until a save can be resumed from (s)"),
                       ("checkpoint_mb_per_s", "MB/s, the busiest rank"),
                       ("restore_s", "restoring a checkpoint (s)")):
        if m.get(name) is not None:
            rows.append({"figure": what, "median": m[name], "p10": m.get(f"{name}_p10"),
                         "p90": m.get(f"{name}_p90"), "n": m.get(f"{name}_n")})
    return pd.DataFrame(rows)


def goodput_curve(cfg: FaultToleranceConfig, result: FaultResult):
    """The goodput against the save interval (seconds of training), from a tenth to ten
    times Daly's (no shorter than a save's time to durable), exact and first-order, for
    this run's measured cost and the config's MTBF."""
    import numpy as np
    import pandas as pd

    m = result.metrics
    if "daly_interval_s" not in m:
        return pd.DataFrame(columns=["interval_s", "goodput", "formula"])
    durable = m.get("checkpoint_durable_s") or 0.0
    grid = [t for t in m["daly_interval_s"] * np.logspace(-1, 1, 41) if t >= durable]
    args = (m["checkpoint_cost_s"], m["mtbf_s"], m["restart_cost_s"], durable)
    return pd.DataFrame(
        [{"interval_s": t, "goodput": goodput.goodput(t, *args), "formula": "exact (Daly)"}
         for t in grid]
        + [{"interval_s": t, "goodput": goodput.goodput_first_order(t, *args),
            "formula": "first order (a check)"} for t in grid])


def how_often_text(cfg: FaultToleranceConfig, result: FaultResult) -> str:
    m = result.metrics
    if "daly_interval_s" not in m:
        return "No save completed, so no cost to plan the interval with."
    longer = (" (lengthened to the time a save takes to become durable)"
              if m.get("interval_lengthened_to_durable") else "")
    text = (f"With a failure every {cfg.mtbf} on average (exponentially distributed) and a save "
            f"costing {m['checkpoint_cost_s']:.3g} s ({cfg.checkpoint}: "
            f"{m['checkpoint_cost_how']}), save every {m['daly_interval_s']:,.0f} s of "
            f"training (Daly's interval{longer}): goodput {m['goodput_at_daly']:.2%}")
    if m.get("own_interval_s") is not None:
        text += (f"; this run's own, a save every {cfg.checkpoint_every} steps "
                 f"({m['own_interval_s']:.3g} s), " + (
                     f"gives {m['goodput_at_own_interval']:.2%}"
                     if m.get("goodput_at_own_interval") is not None
                     else f"is refused: {m['own_interval_refused']}"))
    text += (f". A restart costs {m['restart_cost_s']:.3g} s: {m['restart_cost_how']}. "
             f"`python -m benchlib project --mtbf {cfg.mtbf} --checkpoint-run RUN_ID` says the same.")
    caveat = goodput.first_order_caveat(m)
    return text + (f" Check: {caveat}." if caveat else "")


def describe(cfg: FaultToleranceConfig, result: FaultResult) -> str:
    m = result.metrics
    text = f"{cfg.nproc_per_node} ranks, "
    if m["restarts"]:
        text += (f"rank {cfg.fail_rank} killed after step {cfg.fail_at_step}: {m['restarts']} "
                 f"restart(s), {m['steps_redone']} step(s) redone, recovered in "
                 f"{m['recovery_s']:.1f} s; ")
    else:
        text += "no restart; "
    text += f"final step {m['final_step']}, loss {m['loss_last']:.6f}"
    if m.get("checkpoint_blocking_s") is not None:
        text += (f"; {m['checkpoints_written']} {cfg.checkpoint} saves stalled training "
                 f"{m['checkpoint_blocking_s']:.3g} s each (median)")
    if "loss_diff" in m:
        text += f" (uninterrupted: {m['loss_last_uninterrupted']:.6f}, difference {m['loss_diff']:.2e})"
    return text
