"""What a study hands its training worker (benchlib.workers.single, dp, ddp, lightning,
elastic) in the run.json beside the logs: the training fields of its config, by name
(benchlib.config.training), so that a field added there reaches every worker; the fields
of the other pieces it composes (performance, fault injection), by name too; and the
few a worker takes otherwise, written out here."""

from __future__ import annotations

import dataclasses
from typing import Any

from benchlib import paths
from benchlib.config.training import training_params


def worker_params(cfg: Any) -> dict[str, Any]:
    """The training fields and their values, but the data folder as an absolute path (the
    ranks may start elsewhere), the timeout under the worker's name (`--timeout`: the
    rendezvous and every collective; the study times the whole launch with `timeout_s`),
    and no progress lines in the logs."""
    params = {**training_params(cfg), "path": str(paths.resolve(cfg.path)), "log_interval": 0}
    params["timeout"] = params.pop("timeout_s")
    return params


def piece_params(cfg: Any, piece: type) -> dict[str, Any]:
    """The fields of a config piece `cfg` composes (benchlib.config.performance, ...), by
    name: what the worker's flags generated from the same piece take."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(piece)}
