#!/usr/bin/env python3
"""Where benchlib's language-model step goes against a plain nanoGPT-shaped one (issue 40,
item 6): interleaved rounds, each variant timed by the same wall clock around the same
steps after a burn-in, fp32, SGD with momentum 0.9, at the shape the issue measured: 4
layers x 256 wide, 4 heads, vocabulary 8,192, 256 tokens, batch 8.

    plain        a bare GPT written here the way nanoGPT's model.py is shaped (no biases,
                 exact GELU, dropout modules at p=0, the loss computed in forward) in a
                 bare loop as bench.py drives it (forward, zero_grad, backward, step,
                 loss.item() every step)
    plain_bt     the same with biases and the tanh GELU: benchlib's arithmetic in the
                 plain code (plain_bt / plain: what that arithmetic costs)
    model        benchlib's GPT (benchlib/core/gpt.py) in the bare loop (model / plain_bt:
                 benchlib's model code beyond its arithmetic)
    loop         benchlib's GPT in benchlib's loop (Stepper and run_epoch, as a worker
                 runs them; loop / model: the loop's share)
    worker       benchlib's training worker launched as notebook 50 launches one process
                 (`benchlib.workers.single`, tokens of synthetic ids made on the device):
                 the tokens/s its result holds (worker / loop: the process and the
                 accounting: the steady window after warm-up against this wall clock)

Each round runs every variant once, in a rotated order, so drift in the host's speed
falls on all; ratios are per round, then their median and range (rounds in one process
share its luck: no 95% interval, core.stats). Prints a table; --json keeps the figures.

    python scripts/lm_baseline.py [--rounds 4] [--steps 8] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from benchlib.core import gpt, hostload, loops
from benchlib.launch.launcher import launch

LAYERS, HEADS, WIDTH, VOCAB, TOKENS, BATCH = 4, 4, 256, 8192, 256, 8
LR, MOMENTUM = 0.01, 0.9


class PlainBlock(nn.Module):
    def __init__(self, bias: bool, gelu: str):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(WIDTH, bias=bias), nn.LayerNorm(WIDTH, bias=bias)
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH, bias=bias)
        self.c_proj = nn.Linear(WIDTH, WIDTH, bias=bias)
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH, bias=bias)
        self.mlp_proj = nn.Linear(4 * WIDTH, WIDTH, bias=bias)
        self.gelu = nn.GELU(approximate=gelu)
        self.attn_drop, self.resid_drop, self.mlp_drop = (nn.Dropout(0.0) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.0)
        x = x + self.resid_drop(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))
        return x + self.mlp_drop(self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x)))))


class PlainGPT(nn.Module):
    """nanoGPT's shape, written plainly: the loss in forward, the head tied to wte."""

    def __init__(self, bias: bool = False, gelu: str = "none"):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(TOKENS, WIDTH)
        self.drop = nn.Dropout(0.0)
        self.h = nn.ModuleList(PlainBlock(bias, gelu) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH, bias=bias)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def benchlib_gpt() -> nn.Module:
    return gpt.GPT(gpt.config("gpt-tiny", MODEL_ARGS, TOKENS))


MODEL_ARGS = {"n_layer": LAYERS, "n_head": HEADS, "n_embd": WIDTH, "vocab_size": VOCAB,
              "block_size": TOKENS}


def bare(model: nn.Module, with_loss: bool, x, y, steps: int) -> float:
    """bench.py's loop, plainly: tokens/s over `steps` after 2 burn-in steps."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def step():
        if with_loss:
            _, loss = model(x, y)
        else:
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()
    for _ in range(2):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * x.numel() / (time.perf_counter() - start)


def ours(model: nn.Module, x, y, steps: int) -> float:
    """benchlib's Stepper and run_epoch, timed by the same wall clock."""
    stepper = loops.Stepper("train", torch.device("cpu"), model, lr=LR, momentum=MOMENTUM)
    loops.run_epoch([(x, y)] * 2, stepper, warmup_steps=0)
    start = time.perf_counter()
    loops.run_epoch([(x, y)] * steps, stepper, warmup_steps=0)
    return steps * x.numel() / (time.perf_counter() - start)


def worker(steps: int, folder: Path) -> float:
    """The training worker as notebook 50 launches one process: its record's tokens/s."""
    params = {"model": "gpt-tiny", "model_args": MODEL_ARGS, "dataset": "tokens",
              "seq_len": TOKENS, "batch_size": BATCH, "lr": LR, "momentum": MOMENTUM,
              "max_steps": steps + 2, "warmup_steps": 2, "device": "cpu", "log_interval": 0}
    out = launch("single", params, folder, "single", timeout_s=1800)
    return out.result["metrics"]["samples_per_s"] * TOKENS


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=8, help="timed steps per variant and round")
    p.add_argument("--no-worker", action="store_true", help="leave the worker variant out")
    p.add_argument("--json")
    args = p.parse_args()
    torch.manual_seed(0)
    x = torch.randint(0, VOCAB, (BATCH, TOKENS))
    y = torch.randint(0, VOCAB, (BATCH, TOKENS))
    models = {"plain": PlainGPT(), "plain_bt": PlainGPT(bias=True, gelu="tanh"),
              "model": benchlib_gpt(), "loop": benchlib_gpt()}
    run = {"plain": lambda: bare(models["plain"], True, x, y, args.steps),
           "plain_bt": lambda: bare(models["plain_bt"], True, x, y, args.steps),
           "model": lambda: bare(models["model"], False, x, y, args.steps),
           "loop": lambda: ours(models["loop"], x, y, args.steps)}
    tmp = Path(tempfile.mkdtemp(prefix="lm-baseline-"))
    if not args.no_worker:
        run["worker"] = lambda: worker(args.steps, tmp / f"worker-{time.monotonic_ns()}")
    names = list(run)
    figures: dict[str, list[float]] = {n: [] for n in names}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; host at start: {hostload.figures(hostload.sample())}")
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            figures[name].append(run[name]())
        print(f"round {r + 1}: " + ", ".join(f"{n} {figures[n][-1]:,.0f}" for n in names),
              flush=True)
    pairs = [("plain_bt", "plain"), ("model", "plain_bt"), ("loop", "model"),
             ("worker", "loop"), ("model", "plain"), ("loop", "plain"), ("worker", "plain")]
    print(f"\n{'variant':10} tokens/s (median, range over {args.rounds} rounds)")
    for n in names:
        print(f"{n:10} {statistics.median(figures[n]):,.0f} "
              f"({min(figures[n]):,.0f}-{max(figures[n]):,.0f})")
    print("\nratio (per round, then median and range)")
    ratios = {}
    for a, b in pairs:
        if a in figures and b in figures:
            per = [fa / fb for fa, fb in zip(figures[a], figures[b])]
            ratios[f"{a}/{b}"] = per
            print(f"{a + '/' + b:16} {statistics.median(per):.3f} ({min(per):.3f}-{max(per):.3f})")
    print(f"host at end: {hostload.figures(hostload.sample())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"tokens_per_s": figures, "ratios": ratios,
                                               "steps": args.steps}, indent=1))
    assert all(math.isfinite(v) for vs in figures.values() for v in vs)


if __name__ == "__main__":
    main()
