"""Performance settings a trainer applies to the same work: numeric precision,
torch.compile, the memory format, activation checkpointing and the input's side.
Declared once; notebooks 40 and 50 compose them, and the training workers generate
their flags from them (benchlib.config.flags), each taking those its loop applies.

`compile` is a switch for now. The study of compile modes to come makes it one of off,
default, reduce-overhead, max-autotune, regional under the same name and flag, reading a
table's old `compile: true` as default, as parameter tables read an old name today
(`StudyConfig.renamed`: notebook 40's `arch`, read as `model` with a note)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig, require_min
from benchlib.config.choices import AC_MODES, PRECISIONS


@dataclasses.dataclass
class PerformanceConfig(StudyConfig):
    """How the same training step is made faster: none of it changes what is learned."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"precision": PRECISIONS, "ac": AC_MODES}

    precision: str = "fp32"
    """fp32, tf32 (Ampere+), amp_bf16 or amp_fp16 (CUDA)."""
    compile: bool = False
    """torch.compile the model (its compile time falls in the warm-up steps)."""
    channels_last: bool = False
    """NHWC memory format for images (faster with AMP on tensor cores)."""
    ac: str = "none"
    """Activation checkpointing per block: none, selective (keep the matmuls' outputs,
    recompute the rest) or full (recompute each block's forward in backward)."""
    image_size: int = 224
    """Side in pixels of the images imagefolder and synthetic data give (224 as on
    ImageNet; small on CPU)."""

    def validate(self) -> None:
        super().validate()
        require_min("image_size", self.image_size, 1)
