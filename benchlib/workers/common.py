"""What every worker does before its own work: find its rank (torchrun, Slurm, platform
variables, tcp://, or mp.spawn), send its output to its log, pick its device and
backend, join the process group with a timeout; and after it: rank 0 writes result.json."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.config.choices import BACKENDS, DEFAULT_PORT, DEVICES
from benchlib.distributed.device import choose_backend, device_for, uses_cuda
from benchlib.distributed.env import DistEnv, from_tcp, resolve
from benchlib.distributed.group import barrier_and_destroy, init
from benchlib.launch import protocol

# Faults the tests inject through the environment (never through the user-facing flags):
# rank 1 aborts once inside init (a path marks that it did), or after the result is written.
ABORT_IN_INIT_ONCE = "BENCHLIB_TEST_ABORT_IN_INIT_ONCE"
ABORT_AT_EXIT = "BENCHLIB_TEST_ABORT_AT_EXIT"
Main = Callable[[argparse.Namespace, DistEnv, Any, str], dict[str, Any]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("distributed")
    g.add_argument("--device", default="auto", choices=DEVICES)
    g.add_argument("--backend", default="auto", choices=list(BACKENDS))
    g.add_argument("--timeout", type=float, default=120.0,
                   help="seconds for the rendezvous and every collective")
    g.add_argument("--init-method", help="tcp://HOST:PORT, with --rank and --world-size")
    g.add_argument("--rank", type=int, default=0)
    g.add_argument("--world-size", type=int, default=1)
    g.add_argument("--local-rank", type=int, default=0,
                   help="with --init-method: this rank's GPU on its host (several ranks per host)")
    g.add_argument("--spawn", type=int, default=0, help="start this many ranks with mp.spawn")
    g.add_argument("--master-port", type=int, default=DEFAULT_PORT, help="for --spawn")
    g.add_argument("--nproc-per-node", type=int, help="for platform variables set per node")
    g.add_argument("--log-dir", help="each rank writes <log-dir>/rank<R>.log")
    g.add_argument("--result", help="rank 0 writes its result here (JSON)")
    g.add_argument("--group-of-one", action="store_true",
                   help="join a process group even as the only rank, so that one GPU runs "
                   "NCCL and DDP for real (the GPU check)")


def run_rank(main: Main, args: argparse.Namespace, env: DistEnv) -> None:
    protocol.redirect_output(args.log_dir, env.rank)
    print(protocol.banner(env.rank, env.world_size, env.local_rank,
                          f"from {env.source}, master {env.master_addr}:{env.master_port}"),
          flush=True)
    device = device_for(args.device, env.local_rank)
    backend = choose_backend(device.type, args.backend)
    once = os.environ.get(ABORT_IN_INIT_ONCE)
    if once and env.rank == 1 and not Path(once).exists():
        Path(once).touch()
        os.abort()  # what an init crash inside gloo/TCPStore looks like (SIGABRT)
    if env.world_size > 1 or args.group_of_one:
        init(env, backend, args.timeout)
        print(f"{protocol.JOINED} ({backend})", flush=True)
    try:
        result = main(args, env, device, backend)
    except BaseException as e:
        traceback.print_exc()
        sys.stdout.flush()
        protocol.mark_failed(args.log_dir, env.rank, e)
        os._exit(1)  # do not wait in destroy_process_group for ranks that will never come
    barrier_and_destroy()
    if env.rank == 0:
        protocol.write_result(args.result, result)
    if os.environ.get(ABORT_AT_EXIT) and env.rank == 1:
        os.abort()  # what gloo's teardown crash looks like (tests)


def _spawned(local_rank: int, main: Main, args: argparse.Namespace) -> None:
    env = DistEnv(local_rank, local_rank, args.spawn, args.spawn, 0, "127.0.0.1",
                  args.master_port, "mp_spawn")
    run_rank(main, args, env)


def entry(main: Main, parser: argparse.ArgumentParser, argv: list[str] | None = None,
          check: Callable[[argparse.Namespace], None] | None = None) -> int:
    """Parse, check what can be checked before any rank starts (device, backend, and the
    worker's own `check` of its arguments), then run this process's rank(s)."""
    add_arguments(parser)
    args = parser.parse_args(argv)
    from benchlib.errors import BenchlibError

    try:
        cuda = uses_cuda(args.device)  # gpu without CUDA, nccl on CPU: one line, not a
        choose_backend("cuda" if cuda else "cpu", args.backend)  # traceback per spawned rank
        if check is not None:
            check(args)
        if args.spawn:
            import torch.multiprocessing as mp

            mp.spawn(_spawned, args=(main, args), nprocs=args.spawn, join=True)
            return 0
        if args.init_method:
            env = from_tcp(args.init_method, args.rank, args.world_size, args.local_rank)
        else:
            env = resolve(nproc_per_node=args.nproc_per_node,
                          local_rank=int(os.environ.get("LOCAL_RANK", 0)))
        run_rank(main, args, env)
    except BenchlibError as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return e.status()
    return 0
