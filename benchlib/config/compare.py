"""The comparison's parameters (notebook 95_compare): two result sets side by side."""

from __future__ import annotations

import dataclasses

from benchlib.config.base import StudyConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class CompareConfig(StudyConfig):
    """The comparison notebook (95): two result sets side by side."""

    results_dir: str = "outputs/results"
    """Folder of result records (one sub-folder per study)."""
    base: str = ""
    """The result set before: a label or a folder; empty with `new` empty: the newest set
    against the newest older one that shares a row with it."""
    new: str = ""
    """The result set to judge: a label or a folder."""
    threshold: float = 0.10
    """Smallest change in speed that counts (0.10 = 10%; docs/compare.md explains the default)."""
    metric: str = ""
    """One metric to compare ('all': every one with a direction); empty: each row's main one."""
    only_study: str = ""
    """Only this study's rows (`benchlib compare --study`); empty: every study both sets have."""

    def validate(self) -> None:
        if not 0 < self.threshold < 1:
            raise ConfigError("threshold", f"must be above 0 and below 1 (0.05 = 5%), got "
                              f"{self.threshold}")
        if bool(self.base) != bool(self.new):
            raise ConfigError("base", "give base and new, or neither (the two newest sets)")
