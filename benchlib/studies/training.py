"""What a study hands its training worker (benchlib.workers.single, dp, ddp, lightning,
elastic) in the run.json beside the logs: the training fields of its config, by name
(benchlib.config.training), so that a field added there reaches every worker; and the
few a worker takes otherwise, written out here."""

from __future__ import annotations

from typing import Any

from benchlib import paths
from benchlib.config.training import TrainingConfig


def worker_params(cfg: TrainingConfig) -> dict[str, Any]:
    """The training fields and their values, but the data folder as an absolute path (the
    ranks may start elsewhere), the timeout under the worker's name (`--timeout`: the
    rendezvous and every collective; the study times the whole launch with `timeout_s`),
    and no progress lines in the logs."""
    params = {**cfg.training_params(), "path": str(paths.resolve(cfg.path)), "log_interval": 0}
    params["timeout"] = params.pop("timeout_s")
    return params
