"""Memory savers for models built of blocks (benchlib.core.gpt, a transformers model, your
own with a `blocks` ModuleList): FSDP2 (`fully_shard` per block, then the root: each
rank keeps 1/n of the parameters, gradients and optimizer state, and all-gathers a
block's parameters just before it runs) and activation checkpointing per block (`full`:
a block keeps only its input and runs its forward again in backward; `selective`:
torchtitan's op-level policy, `selective_policy`: it keeps the outputs of attention and of
every matmul but every second one, and recomputes the rest, the second matmuls, norms,
activations and adds)."""

from __future__ import annotations

import torch
from torch import nn

from benchlib.config.choices import FP8_RECIPES
from benchlib.errors import ConfigError

# where the blocks are: benchlib's GPT and most models (`blocks`), transformers' GPT-2
# (`transformer.h`), its Llama-like models (`model.layers`)
BLOCK_PATHS = ("blocks", "transformer.h", "model.layers", "layers")
# torchtitan's op-level selective checkpointing (torchtitan/distributed/
# activation_checkpoint.py): save the outputs of its list of compute ops, except every
# second matmul, which is recomputed with everything else. Its models' linear layers
# have no bias and run `mm`; a biased linear runs `addmm` on the CPU, so both count as
# the matmuls the every-second rule alternates over. Its list also saves FSDP's
# reduce-scatter outputs; they are not ops a block runs here.
MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}
SAVED_OPS = {*MATMULS, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
             torch.ops.aten._scaled_dot_product_efficient_attention.default,
             torch.ops.aten._scaled_dot_product_flash_attention.default,
             torch.ops.aten._scaled_dot_product_cudnn_attention.default}


def selective_policy(meta: dict[str, int]):
    """torchtitan's policy over one checkpointed call: MUST_SAVE for SAVED_OPS except every
    second matmul (counted apart in the forward and in its recompute, so both make the same
    decisions), PREFER_RECOMPUTE for every other op. `meta` holds the counts: a fresh
    mapping each call."""
    from torch.utils.checkpoint import CheckpointPolicy

    def policy(ctx, op, *args, **kwargs):
        key = "recompute_mm_count" if ctx.is_recompute else "forward_mm_count"
        if op in MATMULS:
            meta[key] = meta.get(key, 0) + 1
        save = op in SAVED_OPS and not (op in MATMULS and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
    return policy


def blocks_of(model: nn.Module) -> nn.ModuleList | None:
    for path in BLOCK_PATHS:
        found = model
        for part in path.split("."):
            found = getattr(found, part, None)
        if isinstance(found, nn.ModuleList) and len(found):
            return found
    return None


def require_blocks(model: nn.Module, field: str, value: str) -> nn.ModuleList:
    blocks = blocks_of(model)
    if blocks is None:
        raise ConfigError(field, f"{value} works block by block, and "
                          f"{type(model).__name__} has no blocks (a ModuleList at "
                          f"{', '.join(BLOCK_PATHS)})")
    return blocks


class Checkpointed(nn.Module):
    """A block whose activations are recomputed in backward (`mode` full or selective)."""

    def __init__(self, block: nn.Module, mode: str):
        super().__init__()
        self.block, self.mode = block, mode

    def forward(self, *args, **kwargs):
        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

        context = {}
        if self.mode == "selective":  # a fresh count of matmuls for each call
            context["context_fn"] = lambda: create_selective_checkpoint_contexts(
                selective_policy({}))
        return checkpoint(self.block, *args, use_reentrant=False, **context, **kwargs)


def checkpoint_blocks(model: nn.Module, mode: str) -> nn.Module:
    """Each block wrapped for activation checkpointing (`mode` none leaves the model)."""
    if mode == "none":
        return model
    blocks = require_blocks(model, "ac", mode)
    for i, block in enumerate(blocks):
        blocks[i] = Checkpointed(block, mode)
    return model


def shard(model: nn.Module, precision: str) -> nn.Module:
    """FSDP2 over the process group: each block its own unit, then the root (the
    embeddings and head). amp_bf16: parameters gathered and computed in bf16, gradients
    reduced in fp32 (torchtitan's default policy), as for float8 training (what it does not
    convert runs in bf16; with float8 all-gather, torchao's weights gather in FP8 instead);
    otherwise fp32 throughout."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if precision == "amp_bf16" or precision in FP8_RECIPES else MixedPrecisionPolicy()
    for block in require_blocks(model, "strategy", "fsdp2"):
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model
