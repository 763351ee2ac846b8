"""A decoder-only language model, GPT-2 style, written here so that the transformer study
needs no download and no library: pre-norm blocks of causal self-attention
(`scaled_dot_product_attention`) and a GELU MLP, learned positions, the output head tied
to the token embedding. The blocks are `model.blocks` (a ModuleList), the unit that FSDP2
shards (`fully_shard` per block) and activation checkpointing wraps.

Named sizes: `gpt-tiny` (a CPU test: 2 layers, 128 wide), `gpt2-124m` and `gpt2-350m`
(GPT-2 small and medium: 12 x 768 and 24 x 1024, vocabulary 50,257, 1,024 positions);
`model_args` override n_layer, n_head, n_embd, block_size (positions) and vocab_size; the
data's sequences must fit the positions and its ids the vocabulary.

FLOPs per token, analytically (PaLM, Chowdhery et al. 2022, appendix B): 6N + 12·L·H·Q·T
for a training step (forward and backward), N the parameters that do matmuls (every
parameter but the position table: the tied embedding is the output head's matmul), L
layers, H·Q = n_embd, T the sequence length. `flops_per_token`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F

from benchlib.errors import ConfigError


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int = 1024  # positions
    vocab_size: int = 50257
    dropout: float = 0.0


SIZES = {
    "gpt-tiny": GPTConfig(n_layer=2, n_head=4, n_embd=128, block_size=256, vocab_size=2048),
    "gpt2-124m": GPTConfig(n_layer=12, n_head=12, n_embd=768),
    "gpt2-350m": GPTConfig(n_layer=24, n_head=16, n_embd=1024),
}
OVERRIDES = ("n_layer", "n_head", "n_embd", "block_size", "vocab_size", "dropout")


def config(name: str, model_args: dict | None = None, seq_len: int = 0,
           vocab_size: int = 0) -> GPTConfig:
    """The named size with `model_args` applied, checked against the data: its sequences
    (`seq_len`) must fit the positions, its ids (`vocab_size`: ids 0..vocab_size-1) the
    vocabulary."""
    args = dict(model_args or {})
    unknown = sorted(set(args) - set(OVERRIDES))
    if unknown:
        raise ConfigError("model_args", f"{name} takes {', '.join(OVERRIDES)}, not "
                          f"{', '.join(unknown)}")
    cfg = replace(SIZES[name], **args)
    if cfg.n_embd % cfg.n_head:
        raise ConfigError("model_args", f"n_embd {cfg.n_embd} is not a multiple of n_head "
                          f"{cfg.n_head}")
    if seq_len > cfg.block_size:
        raise ConfigError("seq_len", f"{seq_len} is above {name}'s {cfg.block_size} positions "
                          "(its block size); lower seq_len or set model_args block_size")
    if vocab_size > cfg.vocab_size:
        raise ConfigError("vocab_size", f"the data's ids go up to {vocab_size - 1}, beyond "
                          f"{name}'s vocabulary of {cfg.vocab_size}; lower vocab_size or set "
                          "model_args vocab_size")
    return cfg


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.fc_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # weight tying (GPT-2)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith(("proj.weight", "fc_proj.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        if t > self.cfg.block_size:
            raise ConfigError("seq_len", f"{t} is longer than the model's {self.cfg.block_size} "
                              "positions")
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # logits (batch, seq, vocab)

    def matmul_params(self) -> int:
        """N of 6N: every parameter but the position table (counted once: tied)."""
        return sum(p.numel() for p in self.parameters()) - self.wpe.weight.numel()


def build(name: str, model_args: dict | None = None, seq_len: int = 0,
          vocab_size: int = 0) -> GPT:
    return GPT(config(name, model_args, seq_len, vocab_size))


def flops_per_token(model: GPT, seq_len: int) -> float:
    """A training step's FLOPs per token: 6N + 12·L·n_embd·T (PaLM appendix B)."""
    cfg = model.cfg
    return 6 * model.matmul_params() + 12 * cfg.n_layer * cfg.n_embd * seq_len
