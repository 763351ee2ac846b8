"""`benchlib calibrate --model lm`: benchlib's loop against a bare loop on benchlib's
language model (benchlib.core.gpt), the shape issue 40 measured against nanoGPT: 4 layers
x 256 wide, 4 heads, vocabulary 8,192, 256 tokens, batch 8, fp32, SGD with momentum 0.9.

The bare loop is what nanoGPT's bench.py does per step, written out plainly: forward,
cross-entropy over the flattened logits, zero_grad(set_to_none=True), backward, step.
`same_work` first checks that the two loops do the same arithmetic: one step of each from
the same weights on the same batch gives the same loss and the same weights, so what the
ratio measures is the loop's own cost (its marks, the objective's dispatch, autocast's
context), nothing else. Where benchlib's model itself differs from nanoGPT's (biases,
the GELU's tanh approximation), docs/method.md says, measured by scripts/lm_baseline.py.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.nn import functional as F

from benchlib.core import gpt, loops

SHAPE = {"n_layer": 4, "n_head": 4, "n_embd": 256, "vocab_size": 8192, "block_size": 256}
LR, MOMENTUM = 0.01, 0.9  # SGD with momentum, as measured against nanoGPT


def build(batch_size: int, device: torch.device, model_args: dict[str, int] | None = None,
          seed: int = 0):
    """(model, x, y): benchlib's GPT at `model_args` (the issue's SHAPE by default) and one
    batch of random token ids as long as its positions, made once on the device (no data
    path in the loop)."""
    torch.manual_seed(seed)
    args = {**SHAPE, **(model_args or {})}
    seq_len = args["block_size"]
    model = gpt.GPT(gpt.config("gpt-tiny", args, seq_len)).to(device)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, args["vocab_size"], (batch_size, seq_len), generator=g).to(device)
    y = torch.randint(0, args["vocab_size"], (batch_size, seq_len), generator=g).to(device)
    return model, x, y


def loss_of(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """nanoGPT's: cross-entropy over every position's logits, flattened."""
    return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))


def optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def stepper(model: torch.nn.Module, device: torch.device) -> loops.Stepper:
    return loops.Stepper("train", device, model, lr=LR, momentum=MOMENTUM)


def same_work(batch_size: int, device: torch.device, model_args: dict[str, int] | None = None,
              steps: int = 2) -> dict[str, Any]:
    """`steps` steps of each loop from the same weights on the same batch: their losses
    and the largest difference of any weight after them (0 when they did the same
    arithmetic, up to the order of floating-point sums)."""
    model, x, y = build(batch_size, device, model_args)
    twin = copy.deepcopy(model)
    ours, bare_opt = stepper(model, device), optimizer(twin)
    ours_loss = bare_loss = None
    for _ in range(steps):
        ours_loss = float(ours(x, y).detach())
        bare_opt.zero_grad(set_to_none=True)
        loss = loss_of(twin(x), y)
        loss.backward()
        bare_opt.step()
        bare_loss = float(loss.detach())
    with torch.no_grad():
        diff = max(float((a - b).abs().max()) for a, b in zip(model.parameters(), twin.parameters()))
    return {"benchlib_loss": ours_loss, "bare_loss": bare_loss, "max_weight_diff": diff,
            "same_work": abs(ours_loss - bare_loss) <= 1e-5 * max(1.0, abs(bare_loss))
            and diff <= 1e-5}


def line(check: dict[str, Any]) -> str:
    return (f"same arithmetic: {'yes' if check['same_work'] else 'NO'} (after 2 steps each from "
            f"the same weights: loss {check['benchlib_loss']:.6f} benchlib, "
            f"{check['bare_loss']:.6f} bare; largest weight difference "
            f"{check['max_weight_diff']:.1e})")
