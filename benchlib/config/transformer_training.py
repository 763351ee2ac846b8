"""The transformer_training study's parameters (notebook 50_transformer_training)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.choices import FP8_RECIPES, LM_STRATEGIES
from benchlib.config.performance import PerformanceConfig
from benchlib.config.training import LauncherConfig, RepeatsConfig, TrainingConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class TransformerTrainingConfig(TrainingConfig, RepeatsConfig, PerformanceConfig, LauncherConfig):
    """A decoder language model's training (notebook 50): one process, DDP, or FSDP2
    (parameters, gradients and optimizer state sharded over the ranks), each with or
    without activation checkpointing and torch.compile; tokens/s, MFU and peak memory.
    The training parameters are benchlib.config.training's: `model` one of benchlib's GPT
    sizes (gpt-tiny, gpt2-124m, gpt2-350m; n_layer, n_head, n_embd through model_args),
    an hf:NAME or your own; `dataset` tokens (ids made on the device, seq_len and
    vocab_size the model's unless given), tokenfile (windows of nanoGPT's train.bin that
    `benchlib data` writes) or your own; the launcher and the ranks on this host, one per
    device (single: 1), are its too. Checkpointing, compile and precision are
    benchlib.config.performance's."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"strategy": LM_STRATEGIES}
    defaults: ClassVar[dict[str, Any]] = {"model": "gpt-tiny", "dataset": "tokens",
                                          "seq_len": 128, "batch_size": 8, "max_steps": 20,
                                          "warmup_steps": 3, "lr": 0.01, "nproc_per_node": 2}

    strategy: str = "fsdp2"
    """single (one device), ddp (a full copy per rank) or fsdp2 (sharded: each rank holds
    1/n of the parameters, gradients and optimizer state)."""

    def validate(self) -> None:
        super().validate()
        if self.strategy == "single" and self.nproc_per_node != 1:
            raise ConfigError("nproc_per_node", "single runs one process on one device: set 1")
        if self.precision in FP8_RECIPES and self.compile_cache == "warm":
            raise ConfigError("compile_cache", "an FP8 row's A/B compiles both sides, bf16 and "
                              "FP8, from an empty cache; warm would prime one side only")
        if self.strategy == "fsdp2" and self.precision == "amp_fp16":
            raise ConfigError("precision", "fsdp2 here runs fp32, tf32 or amp_bf16 (its mixed "
                              "precision policy); amp_fp16 needs a gradient scaler FSDP2 "
                              "does not share")
