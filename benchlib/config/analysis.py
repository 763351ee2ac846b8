"""The analysis study's parameters (notebook 90_analysis)."""

from __future__ import annotations

import dataclasses

from benchlib.config.base import StudyConfig


@dataclasses.dataclass
class AnalysisConfig(StudyConfig):
    """The analysis notebook (90): where the records are."""

    results_dir: str = "outputs/results"
    """Folder of result records (one sub-folder per study)."""
