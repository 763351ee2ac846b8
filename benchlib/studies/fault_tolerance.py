"""The fault-tolerance study (notebook 35, seed 001): an elastic run under torchrun with
`--max-restarts`, one rank killed on purpose after step `fail_at_step`; torchrun restarts
the ranks, they resume from the newest checkpoint and finish. Optionally the same run
without the failure, so the final losses can be compared (with fixed seeds and no loader
workers they are equal: data order, RNG states and the optimizer all resume exactly).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

from benchlib import paths
from benchlib.config import FaultToleranceConfig
from benchlib.config.fault_injection import FaultInjectionConfig
from benchlib.core.metrics import without_params
from benchlib.launch.launcher import launch
from benchlib.studies import checks, training


@dataclass
class FaultResult:
    metrics: dict[str, Any]
    details: dict[str, Any]


def worker_params(cfg: FaultToleranceConfig, checkpoints: str, fail: bool) -> dict[str, Any]:
    """The elastic worker's parameters (its run.json): the training fields and the faults
    to inject (benchlib.studies.training), the cosine schedule and the checkpoints; dummy
    data (random images, no folder) as many as the steps take; without `fail`, no rank
    is killed (the uninterrupted run)."""
    params = {**training.worker_params(cfg), **training.piece_params(cfg, FaultInjectionConfig),
              "lr_schedule": "cosine", "checkpoint_every": cfg.checkpoint_every,
              "checkpoints_path": checkpoints, "resume_or_start": True}
    if cfg.dataset == "dummy":
        params["dummy_size"] = cfg.batch_size * cfg.nproc_per_node * max(cfg.max_steps, 1)
    if not fail:
        params["fail_at_step"] = 0
    return params


def _launch(cfg: FaultToleranceConfig, run_dir, fail: bool) -> dict[str, Any]:
    checkpoints = run_dir / "checkpoints"
    shutil.rmtree(checkpoints, ignore_errors=True)  # a fresh run, not a resume of the last one
    out = launch("elastic", worker_params(cfg, str(checkpoints), fail), run_dir / "logs",
                 "torchrun", cfg.nproc_per_node, timeout_s=cfg.timeout_s,
                 max_restarts=cfg.max_restarts)
    return {**out.result, "wall_s": out.wall_s}


def preflight(cfg: FaultToleranceConfig) -> None:
    """Where the row runs: the device, one rank per device, the data prepared."""
    cuda = checks.device_and_backend(cfg.device, "auto")
    checks.ranks_fit("nproc_per_node", cfg.nproc_per_node, cuda)
    if cfg.dataset != "dummy":  # dummy images: each rank checks its model before it joins
        checks.data_prepared(cfg.path, cfg.dataset)
        checks.own_code_trains(cfg)


def run(cfg: FaultToleranceConfig, run_id: str = "interactive") -> FaultResult:
    preflight(cfg)
    root = paths.outputs_dir() / "logs" / run_id
    faulty = _launch(cfg, root / "interrupted", fail=True)
    metrics = {**without_params(faulty["metrics"], cfg), "launch_s": faulty["wall_s"],
               "log_dir": str(root)}
    details = {"timeline": faulty["details"]["timeline"], "restarts": faulty["details"]["restarts"]}
    if cfg.compare_uninterrupted:
        clean = _launch(cfg, root / "uninterrupted", fail=False)
        metrics["loss_last_uninterrupted"] = clean["metrics"]["loss_last"]
        metrics["loss_diff"] = abs(metrics["loss_last"] - clean["metrics"]["loss_last"])
        details["timeline_uninterrupted"] = clean["details"]["timeline"]
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
    if "loss_diff" in m:
        text += f" (uninterrupted: {m['loss_last_uninterrupted']:.6f}, difference {m['loss_diff']:.2e})"
    return text
