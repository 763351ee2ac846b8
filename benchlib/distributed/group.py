"""The process group: join it with a timeout on the rendezvous and every collective,
gather a value from every rank, leave together."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from benchlib.distributed.env import DistEnv


def init(env: DistEnv, backend: str, timeout_s: float) -> None:
    """Join the process group; rendezvous and every collective time out after `timeout_s`."""
    import torch.distributed as dist

    if env.source != "tcp":
        os.environ.update(env.as_environ())
    dist.init_process_group(backend, init_method=env.init_method, rank=env.rank,
                            world_size=env.world_size, timeout=timedelta(seconds=timeout_s))


def gather_objects(value: Any) -> list[Any]:
    """`value` from every rank, in rank order (all_gather_object); alone: [value]."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def barrier_and_destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
