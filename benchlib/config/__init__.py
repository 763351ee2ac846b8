"""Each study's parameters as a dataclass, checked when it is built: the top layer of
benchlib, pure (no torch, no files, no questions to the machine).

A notebook's `parameters` cell holds plain values; the next cell turns them into one
of these (`cfg = DataPrepConfig.from_params(globals())`). A sweep builds the same
config for every row before anything runs, so bad input fails early with a message
that names the field and what is allowed.
"""

from benchlib.config.analysis import AnalysisConfig
from benchlib.config.base import StudyConfig
from benchlib.config.compare import CompareConfig
from benchlib.config.data_prep import DataPrepConfig
from benchlib.config.dp_vs_ddp import DistConfig
from benchlib.config.fault_tolerance import ElasticConfig
from benchlib.config.framework_comparison import FrameworkConfig
from benchlib.config.multinode_lightning import MultinodeConfig
from benchlib.config.single_device_io import IOConfig

CONFIGS: dict[str, type[StudyConfig]] = {
    "DataPrepConfig": DataPrepConfig,
    "AnalysisConfig": AnalysisConfig,
    "CompareConfig": CompareConfig,
    "IOConfig": IOConfig,
    "DistConfig": DistConfig,
    "FrameworkConfig": FrameworkConfig,
    "MultinodeConfig": MultinodeConfig,
    "ElasticConfig": ElasticConfig,
}

__all__ = ["CONFIGS", "StudyConfig", *CONFIGS]
