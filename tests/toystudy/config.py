"""The toy study's parameters."""

import dataclasses

from benchlib.config.base import StudyConfig, require_min


@dataclasses.dataclass
class ToyConfig(StudyConfig):
    toys: int = 3
    """Toys put in the box."""
    box: str = "small"
    """Which box."""

    def validate(self) -> None:
        super().validate()
        require_min("toys", self.toys, 1)
