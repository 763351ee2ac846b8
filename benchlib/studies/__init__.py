"""One module per notebook study, named as the study is everywhere (notebook, params,
config, analysis, report). Each has `run(cfg, run_id)` and `preflight(cfg)`: the checks
that need the machine a row runs on (a GPU, free cores, the data prepared), run there
(a local sweep, or the Slurm array task) and never where a plan is only loaded."""

from __future__ import annotations

import importlib
from typing import Any

from benchlib.config.studies import BY_NAME


def preflight(cfg: Any) -> None:
    """The study's runtime checks for `cfg` (a study config); nothing for a study without.
    The module is imported here, by name, so that loading a plan imports no torch."""
    study = type(cfg).study
    if study in BY_NAME and BY_NAME[study].preflight:
        importlib.import_module(f"benchlib.studies.{study}").preflight(cfg)
