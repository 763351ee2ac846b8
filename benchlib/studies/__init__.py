"""One module per notebook study, named as the study is everywhere (notebook, params,
config, analysis, report). Each has `run(cfg, run_id)` and `preflight(cfg)`: the checks
that need the machine a row runs on (a GPU, free cores, the data prepared), run there
(a local sweep, or the Slurm array task) and never where a plan is only loaded."""

from __future__ import annotations

import importlib
from typing import Any

from benchlib.config import studies


def preflight(cfg: Any) -> None:
    """The study's runtime checks for `cfg` (a study config), from the module its registry
    entry names; nothing for a study without. The module is imported here, by name, so
    that loading a plan imports no torch."""
    entry = next((s for s in studies.registry() if s.name == type(cfg).study), None)
    if entry is not None and entry.preflight and entry.module:
        importlib.import_module(entry.module).preflight(cfg)
