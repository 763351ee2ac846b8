"""The process group: join it with a timeout on the rendezvous and every collective,
gather a value from every rank, leave together."""

from __future__ import annotations

import os
import sys
import threading
from datetime import timedelta
from typing import Any

from benchlib.distributed.env import DistEnv
from benchlib.errors import UsageError

# torch's own timeout does not cover every wait of the rendezvous (a port held by a
# process that accepts and never answers hung a tcp:// rank until it was killed)
JOIN_GRACE_S = 5.0


def init(env: DistEnv, backend: str, timeout_s: float) -> None:
    """Join the process group; rendezvous and every collective time out after `timeout_s`.
    A join still waiting `JOIN_GRACE_S` later ends the process with one line naming what
    it waited for."""
    import torch.distributed as dist

    if env.source != "tcp":
        os.environ.update(env.as_environ())
    watchdog = threading.Timer(timeout_s + JOIN_GRACE_S, _gave_up, (env, timeout_s))
    watchdog.daemon = True
    watchdog.start()
    try:
        dist.init_process_group(backend, init_method=env.init_method, rank=env.rank,
                                world_size=env.world_size, timeout=timedelta(seconds=timeout_s))
    except dist.DistNetworkError as e:
        if "EADDRINUSE" not in str(e):
            raise
        raise UsageError(f"init_method: port {env.master_port} on {env.master_addr} is already in "
                         "use, so rank 0 cannot host the rendezvous there; pick a free port "
                         "(tcp://HOST:PORT, --port or MASTER_PORT)") from None
    finally:
        watchdog.cancel()


def _gave_up(env: DistEnv, timeout_s: float) -> None:
    print(f"rank {env.rank}: no process group at {env.master_addr}:{env.master_port} within "
          f"{timeout_s:.0f} s (timeout): the other {env.world_size - 1} rank(s) never joined, or "
          "something that is not a rendezvous holds that port", file=sys.stderr, flush=True)
    os._exit(1)  # the join is stuck in C++: nothing else ends it


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
