"""Each study's parameters as a dataclass, checked when it is built: the top layer of
benchlib, pure (no torch, no files, no questions to the machine).

A notebook's `parameters` cell holds plain values; the next cell turns them into one
of these (`cfg = DataPrepConfig.from_params(globals())`). A sweep builds the same
config for every row before anything runs, so bad input fails early with a message
that names the field and what is allowed. The classes are re-exported here for
`from benchlib.config import DpVsDdpConfig`; a study's config is found from its registry
entry (`studies.config_class`), so a new study needs no import here.
"""

from collections.abc import Iterator, Mapping

from benchlib.config import studies
from benchlib.config.analysis import AnalysisConfig
from benchlib.config.base import StudyConfig
from benchlib.config.compare import CompareConfig
from benchlib.config.compile import CompileConfig
from benchlib.config.data_prep import DataPrepConfig
from benchlib.config.dp_vs_ddp import DpVsDdpConfig
from benchlib.config.fault_tolerance import FaultToleranceConfig
from benchlib.config.framework_comparison import FrameworkComparisonConfig
from benchlib.config.memory_and_batch import MemoryAndBatchConfig
from benchlib.config.multinode_lightning import MultinodeLightningConfig
from benchlib.config.scaling_projection import ScalingProjectionConfig
from benchlib.config.single_device_io import SingleDeviceIoConfig
from benchlib.config.transformer_training import TransformerTrainingConfig


class _Configs(Mapping):
    """Config class name -> class, for every study the registry lists (its `config`: a
    class of its config module benchlib.config.<name>, or `pkg.module:Class` for a study
    of one's own)."""

    def _all(self) -> dict[str, type[StudyConfig]]:
        return {study.config.rpartition(":")[2]: studies.config_class(study)
                for study in studies.registry()}

    def __getitem__(self, name: str) -> type[StudyConfig]:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


CONFIGS: Mapping[str, type[StudyConfig]] = _Configs()

__all__ = ["CONFIGS", "StudyConfig", "AnalysisConfig", "CompareConfig", "CompileConfig", "DataPrepConfig",
           "DpVsDdpConfig", "FaultToleranceConfig", "FrameworkComparisonConfig",
           "MemoryAndBatchConfig", "MultinodeLightningConfig", "ScalingProjectionConfig",
           "SingleDeviceIoConfig", "TransformerTrainingConfig"]
