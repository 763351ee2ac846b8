"""One module per notebook study, named as the study is everywhere (notebook, params,
config, analysis, report). Each has `run(cfg, run_id)` and `preflight(cfg)`: the checks
that need the machine a row runs on (a GPU, free cores, the data prepared), run there
(a local sweep, or the Slurm array task) and never where a plan is only loaded."""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "single_device_io": "benchlib.iostudy",
    "dp_vs_ddp": "benchlib.ddpstudy",
    "multinode_lightning": "benchlib.multinode",
    "fault_tolerance": "benchlib.faultstudy",
    "framework_comparison": "benchlib.frameworkstudy",
}


def preflight(cfg: Any) -> None:
    """The study's runtime checks for `cfg` (a study config); nothing for a study without."""
    module = _MODULES.get(type(cfg).study)
    if module is not None:
        importlib.import_module(module).preflight(cfg)
