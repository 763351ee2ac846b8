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
from benchlib.config.dp_vs_ddp import DpVsDdpConfig
from benchlib.config.fault_tolerance import FaultToleranceConfig
from benchlib.config.framework_comparison import FrameworkComparisonConfig
from benchlib.config.memory_and_batch import MemoryAndBatchConfig
from benchlib.config.multinode_lightning import MultinodeLightningConfig
from benchlib.config.scaling_projection import ScalingProjectionConfig
from benchlib.config.single_device_io import SingleDeviceIoConfig
from benchlib.config.transformer_training import TransformerTrainingConfig

CONFIGS: dict[str, type[StudyConfig]] = {c.__name__: c for c in (
    DataPrepConfig, SingleDeviceIoConfig, MemoryAndBatchConfig, DpVsDdpConfig,
    MultinodeLightningConfig, FaultToleranceConfig, FrameworkComparisonConfig,
    TransformerTrainingConfig, ScalingProjectionConfig, AnalysisConfig, CompareConfig)}

__all__ = ["CONFIGS", "StudyConfig", *CONFIGS]
