"""What saving and restoring one model's training state costs in each checkpoint mode
(benchlib.trainers.saver), with no training in between: `python -m
benchlib.workers.checkpoint_bench`. The tests run it on two gloo ranks, the GPU check on
one GPU.

The model (replicated as under DDP, or FSDP2's shards) and SGD's momentum, filled by one
step of random gradients, are saved `saves` times per mode, each save durable before the
next (so `total_s` is that save's alone), then the newest restored `restores` times over
a scrambled state, each time checked to give back the state that was saved. The
asynchronous modes' staging rate is the state a rank hands over (its bytes) over the time
training waited: on a GPU the copy to CPU memory, pageable or pinned.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
import torch.distributed as dist

from benchlib import paths
from benchlib.core import checkpoint_cost, envinfo
from benchlib.core.models import build_model
from benchlib.distributed.env import DistEnv
from benchlib.trainers import checkpoint
from benchlib.trainers.ddp_checkpoints import checksum, scramble
from benchlib.trainers.saver import Saver, tensor_bytes


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _model(args: argparse.Namespace, device: torch.device) -> torch.nn.Module:
    """A built-in model (a GPT for token ids, the others for small images), FSDP2's
    shards of it with --strategy fsdp2."""
    from benchlib.config.choices import GPT_MODELS
    from benchlib.distributed import fsdp

    torch.manual_seed(args.seed)
    shape = (1, 28, 28) if args.model == "toynet" else (3, 32, 32)
    lm = args.model in GPT_MODELS
    model = build_model(args.model, (0,) if lm else shape, model_args=args.model_args,
                        tokens=lm).to(device)
    return fsdp.shard(model, "fp32") if args.strategy == "fsdp2" else model


def mode_figures(args: argparse.Namespace, env: DistEnv, mode: str, model, optimizer) -> dict:
    """`saves` saves of the state in `mode`, then `restores` restores; its figures."""
    saver = Saver(mode, checkpoint.check_writable(paths.resolve(args.checkpoint_path) / mode),
                  timeout_s=args.timeout)
    meta = {"model": args.model, "world_size": env.world_size, "strategy": args.strategy}
    for step in range(1, args.saves + 1):
        saver.save(step, model, optimizer, {"position": {"step": step}}, {**meta, "step": step})
        saver.wait()
        _barrier()  # rank 0 wrote the sidecar; nobody starts the next save before
    expected = checksum(model, optimizer)
    found = checkpoint.latest(saver.folder)
    for _ in range(args.restores):
        scramble(model, optimizer)
        saver.restore(found, model, optimizer)
        _barrier()
    saver.close()
    events = [s.event() for s in saver.saves]
    return {**checkpoint_cost.figures(events, saver.restores, mode), "saves": events,
            "restore_matches": checksum(model, optimizer) == expected,
            "checkpoint_pinned": saver.pinned, "checkpoint_stager_reused": saver.stager_reused}


def bench(args: argparse.Namespace, env: DistEnv, device: torch.device, backend: str) -> dict:
    model = _model(args, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for p in model.parameters():  # one step: SGD's momentum buffers exist and are saved
        p.grad = torch.randn_like(p)
    optimizer.step()
    modes = {mode: mode_figures(args, env, mode, model, optimizer) for mode in args.modes}
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    metrics: dict[str, Any] = {
        "model_params": sum(p.numel() for p in model.parameters()),
        "state_bytes_per_rank": tensor_bytes(state), "world_size": env.world_size,
        "backend_used": backend if dist.is_initialized() else None,
        "device_name": envinfo.device_name(device), "device_type": device.type}
    for mode, figures in modes.items():  # flat, each figure named after its mode
        metrics.update({f"{mode}_{k}": v for k, v in figures.items()
                        if k != "checkpoint_mode" and not isinstance(v, list)})
    metrics["summary"] = "; ".join(
        f"{mode} blocking {m['checkpoint_blocking_s']:.3g} s, total {m['checkpoint_total_s']:.3g}"
        f" s, restore {m['restore_s']:.3g} s" for mode, m in modes.items())
    return {"metrics": metrics, "details": {"modes": modes}}
