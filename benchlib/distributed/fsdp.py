"""Memory savers for models built of blocks (benchlib.core.gpt, a transformers model, your
own with a `blocks` ModuleList): FSDP2 (`fully_shard` per block, then the root: each
rank keeps 1/n of the parameters, gradients and optimizer state, and all-gathers a
block's parameters just before it runs) and activation checkpointing per block (`full`:
a block keeps only its input and runs its forward again in backward; `selective`: it
keeps the outputs of its matmuls and attention, the costly ops, and recomputes the rest,
the norms, activations and adds, as torchtitan's op-level selective checkpointing does)."""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from benchlib.errors import ConfigError

# where the blocks are: benchlib's GPT and most models (`blocks`), transformers' GPT-2
# (`transformer.h`), its Llama-like models (`model.layers`)
BLOCK_PATHS = ("blocks", "transformer.h", "model.layers", "layers")
# what selective checkpointing keeps: the outputs of these (matmuls and attention)
SAVED_OPS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
             torch.ops.aten.bmm.default, torch.ops.aten.linear.default,
             torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
             torch.ops.aten._scaled_dot_product_efficient_attention.default,
             torch.ops.aten._scaled_dot_product_flash_attention.default,
             torch.ops.aten._scaled_dot_product_cudnn_attention.default}


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
        if self.mode == "selective":
            def policy(ctx, op, *a, **k):
                from torch.utils.checkpoint import CheckpointPolicy

                return CheckpointPolicy.MUST_SAVE if op in SAVED_OPS else \
                    CheckpointPolicy.PREFER_RECOMPUTE
            context["context_fn"] = partial(create_selective_checkpoint_contexts, policy)
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
    reduced in fp32 (torchtitan's default policy); otherwise fp32 throughout."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if precision == "amp_bf16" else MixedPrecisionPolicy()
    for block in require_blocks(model, "strategy", "fsdp2"):
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model
