"""The process group: join it with a timeout on the rendezvous and every collective,
gather a value from every rank, leave together."""

from __future__ import annotations

import os
import re
import sys
import threading
from datetime import timedelta
from typing import Any

from benchlib.distributed.env import DistEnv
from benchlib.errors import LaunchError, UsageError

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
        if "EADDRINUSE" in str(e):
            raise UsageError(f"init_method: port {env.master_port} on {env.master_addr} is "
                             "already in use, so rank 0 cannot host the rendezvous there; pick "
                             "a free port (tcp://HOST:PORT, --port or MASTER_PORT)") from None
        if "timed out" not in str(e).lower():
            raise
        raise LaunchError(f"rank {env.rank}: nothing answered at {_where(env)} within "
                          f"{timeout_s:.0f} s: start rank 0 there (it hosts the rendezvous), "
                          f"and check that {_where(env)} is reachable from this host",
                          env.rank) from None
    except dist.DistStoreError as e:
        joined = _JOINED.search(str(e))
        if joined is None:
            raise
        raise LaunchError(f"rank {env.rank}: no process group at {_where(env)} within "
                          f"{timeout_s:.0f} s: {joined['n']} of {joined['of']} ranks joined; "
                          f"start the other rank(s) {_how_to_start(env)}, and check that "
                          f"{_where(env)} is reachable from their hosts", env.rank) from None
    finally:
        watchdog.cancel()


# the store rank 0 hosts gave up: "Timed out after 4 seconds waiting for clients. 1/2
# clients joined."
_JOINED = re.compile(r"(?P<n>\d+)/(?P<of>\d+) clients joined")


def _where(env: DistEnv) -> str:
    return f"{env.master_addr}:{env.master_port}"


def _how_to_start(env: DistEnv) -> str:
    if env.source == "tcp":
        return (f"with --init-method tcp://{_where(env)} --world-size {env.world_size} "
                "--rank R")
    return f"the way this one was started ({env.source}, MASTER_ADDR and MASTER_PORT as here)"


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
