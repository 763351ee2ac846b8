"""The multi-node study (notebook 30): Lightning DDP and benchlib's raw DDP loop on the
same model and data, `nnodes` x `nproc_per_node` ranks.

Locally every "node" is its own torchrun agent (c10d rendezvous on 127.0.0.1) or
Lightning node process on this host - the code path of a real cluster. Inside a Slurm
job, `launcher: srun` spreads the same workers over the job's nodes: `srun torchrun`
for raw DDP, `srun python` with one task per device for Lightning.
"""

from __future__ import annotations

from typing import Any

from benchlib.config import MultinodeLightningConfig
from benchlib.core.metrics import without_params
from benchlib.errors import LaunchError
from benchlib.slurm.capacity import check_layout
from benchlib.studies import checks, repeats, training
from benchlib.studies.dp_vs_ddp import DistResult
from benchlib.studies.repeats import Launch

_DDP_ONLY = ("backend", "log_interval")  # the Lightning worker picks these itself


def launches(cfg: MultinodeLightningConfig, run_id: str = "interactive") -> list[Launch]:
    """`repeats` launches (seed 000's --repeats, each fresh processes) of the trainer's
    worker on `nnodes` x `nproc_per_node` ranks the row's launcher way: under srun, raw
    DDP as `srun torchrun`, Lightning one task per device. The Lightning worker's own
    `--repeats` (epochs repeated inside one launch) is not the row's."""
    worker = "lightning" if cfg.trainer == "lightning" else "ddp"
    return repeats.repeated(Launch(worker, _worker_params(cfg), cfg.launcher, cfg.nproc_per_node,
                                   cfg.nnodes, timeout_s=cfg.timeout_s, handed=("repeats",),
                                   options={"join_timeout_s": cfg.join_timeout_s,
                                            "srun_torchrun": cfg.trainer == "ddp"}),
                            cfg.repeats)


def _worker_params(cfg: MultinodeLightningConfig) -> dict[str, Any]:
    """The worker's parameters (its run.json): the training fields (benchlib.studies.
    training), for Lightning less what it picks itself and with the layout it checks its
    launcher against."""
    params = training.worker_params(cfg)
    if cfg.trainer == "lightning":
        params = {k: v for k, v in params.items() if k not in _DDP_ONLY}
        params.update(devices=cfg.nproc_per_node, nnodes=cfg.nnodes)
    return params


def preflight(cfg: MultinodeLightningConfig) -> None:
    """Where the row runs. Locally: the ranks fit this host and an epoch has a timed step.
    Under Slurm (`launcher: srun`) the layout Slurm must start and the data it reads (the
    allocation's devices are Slurm's to give); the partition's capacity is the Slurm
    sweep's check, made once before it submits."""
    if cfg.launcher == "srun":
        check_layout(cfg.trainer, cfg.nnodes, cfg.nproc_per_node, gpu=cfg.device == "gpu")
        checks.steps_fit(cfg, cfg.batch_size * cfg.world_size, checks.own_code_trains(cfg))
        return
    cuda = checks.device_and_backend(cfg.device, cfg.backend)
    checks.ranks_fit("nproc_per_node", cfg.world_size, cuda)
    checks.steps_fit(cfg, cfg.batch_size * cfg.world_size, checks.own_code_trains(cfg))


def run(cfg: MultinodeLightningConfig, run_id: str = "interactive") -> DistResult:
    """`repeats` launches (seed 000's --repeats); samples/s over every epoch of them, or over
    the launches, as `repeat_mode` says (benchlib.studies.repeats)."""
    preflight(cfg)
    log_dir = repeats.row_logs(run_id)
    launched = repeats.launch_all(launches(cfg, run_id), log_dir)
    figures, details = repeats.figures(cfg.repeat_mode, launched)
    figures.update(repeats.token_figures({**launched[0].result["metrics"], **figures}))
    metrics = {**launched[0].result["metrics"], **figures, "log_dir": str(log_dir),
               "launch_retries": sum(out.result["metrics"].get("launch_retries", 0)
                                     for out in launched)}
    metrics = without_params(metrics, cfg)
    if metrics["world_size"] != cfg.world_size:
        raise LaunchError(f"world_size: the run had {metrics['world_size']} ranks, "
                          f"{cfg.nnodes} x {cfg.nproc_per_node} = {cfg.world_size} were asked for")
    return DistResult(metrics, details)


def describe(cfg: MultinodeLightningConfig, result: DistResult) -> str:
    m = result.metrics
    return (f"{cfg.trainer} via {cfg.launcher}, {cfg.nnodes} node(s) x {cfg.nproc_per_node} on "
            f"{m['device_name']}: {m['samples_per_s']:,.1f} samples/s (p10 "
            f"{m['samples_per_s_p10']:,.1f}, p90 {m['samples_per_s_p90']:,.1f}), global batch "
            f"{m['global_batch']}, launch to result {m['launch_s']:.1f} s")
