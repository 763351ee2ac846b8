"""The DataParallel vs DDP study (notebook 20): launch the chosen trainer as
subprocesses, then (optionally) the all-reduce benchmark with the same ranks.

The notebook's kernel never trains: `run()` starts `python -m benchlib.workers.<strategy>`
through `benchlib.launch` (the launches `launches(cfg)` lists, by the one loop,
benchlib.studies.repeats), and every rank's log lands in outputs/logs/<run_id>/.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchlib.config import DpVsDdpConfig
from benchlib.config.fault_injection import FaultInjectionConfig
from benchlib.studies import checks, repeats, training
from benchlib.studies.repeats import Launch


@dataclass
class DistResult:
    metrics: dict[str, Any]
    details: dict[str, Any]


def launches(cfg: DpVsDdpConfig, run_id: str = "interactive") -> list[Launch]:
    """The trainer `repeats` times (ddp: `nproc_per_node` ranks the row's launcher way;
    single and dp: one process), then, where asked and there are several ranks, the
    all-reduce benchmark on the same ranks, once."""
    launcher = cfg.launcher if cfg.strategy == "ddp" else "single"
    nproc = cfg.nproc_per_node if cfg.strategy == "ddp" else 1
    planned = repeats.repeated(Launch(cfg.strategy, _trainer_params(cfg), launcher, nproc,
                                      timeout_s=cfg.timeout_s), cfg.repeats)
    if cfg.allreduce and nproc > 1:
        planned.append(Launch("allreduce", {"max_bytes": cfg.allreduce_max_bytes,
                                            "device": cfg.device, "backend": cfg.backend,
                                            "timeout": cfg.timeout_s},
                              launcher, nproc, timeout_s=cfg.timeout_s, log="allreduce",
                              role="allreduce"))
    return planned


def _trainer_params(cfg: DpVsDdpConfig) -> dict[str, Any]:
    """The trainer worker's parameters (its run.json) for this row: the training fields
    and the faults to inject (benchlib.studies.training); dp: one process over exactly the
    devices asked for; the traces asked for."""
    params = {**training.worker_params(cfg),
              **training.piece_params(cfg, FaultInjectionConfig), "export_trace": cfg.export_trace}
    if cfg.strategy == "dp":
        params["dp_devices"] = cfg.nproc_per_node
    return params


def preflight(cfg: DpVsDdpConfig) -> None:
    """Where the row runs: device and backend, one rank per device, an epoch with a timed
    step after the warm-up on the data prepared here."""
    cuda = checks.device_and_backend(cfg.device, cfg.backend)
    checks.ranks_fit("nproc_per_node", cfg.nproc_per_node, cuda)
    # ddp: a batch per rank; dp: a batch per device its one process spans (GPUs only)
    per_step = cfg.batch_size * (cfg.nproc_per_node if cfg.strategy == "ddp" or cuda else 1)
    checks.steps_fit(cfg, per_step, checks.own_code_trains(cfg))


def run(cfg: DpVsDdpConfig, run_id: str = "interactive") -> DistResult:
    """`repeats` launches of the trainer; samples/s over epochs or launches as
    `repeat_mode` says (benchlib.studies.repeats); then the all-reduce, once."""
    preflight(cfg)
    log_dir, planned = repeats.row_logs(run_id), launches(cfg, run_id)
    done = repeats.launch_all(planned, log_dir)
    metrics, details = repeats.of_launches(cfg.repeat_mode,
                                           repeats.of_role(planned, done, "train"))
    metrics["log_dir"] = str(log_dir)
    details["allreduce"] = []
    for reduced in repeats.of_role(planned, done, "allreduce"):
        ar = reduced.result["metrics"]
        metrics.update(busbw_gbps=ar["busbw_gbps"], algbw_gbps=ar["algbw_gbps"],
                       allreduce_latency_s=ar["latency_s"])
        details["allreduce"] = reduced.result["details"]["sizes"]
    return DistResult(metrics, details)


def describe(cfg: DpVsDdpConfig, result: DistResult) -> str:
    m = result.metrics
    how = f"{cfg.strategy}" + (f" via {cfg.launcher}, {m['world_size']} ranks" if cfg.strategy == "ddp" else "")
    unit = "launches" if cfg.repeat_mode == "process" else "epochs"
    line = (f"{how} on {m['device_name']}: {m['samples_per_s']:,.1f} samples/s "
            f"(p10 {m['samples_per_s_p10']:,.1f}, p90 {m['samples_per_s_p90']:,.1f} over "
            f"{m['samples_per_s_n']} {unit}), "
            f"batch {m['batch_s'] * 1e3:.0f} ms, global batch {m['global_batch']}")
    if m.get("busbw_gbps") is not None:
        line += f"; all-reduce busbw {m['busbw_gbps']:.2f} GB/s"
    return line
