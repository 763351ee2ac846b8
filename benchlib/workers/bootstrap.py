"""The one rank bootstrap behind every `python -m benchlib.workers.<name>`.

A worker is a `Worker`: its flags, its checks, where its rank comes from and its work.
`run()` does the rest the same way for all of them:

    parse, check          bad input: one line `PROG: message`, exit 2, before any rank exists
    find                  this process's rank (torchrun, Slurm, platform variables, tcp://)
    (--config run.json    the parameters as data, written by the study: flags win)
    log                   stdout and stderr into <log-dir>/rank<R>.log (launch.protocol)
    place                 what the rank checks alone (Lightning: the launcher's layout;
                          elastic: its checkpoints), then the rank banner
    work                  device, backend, joining the process group, training
    leave                 every rank leaves the group together; rank 0 writes result.json

and fails the same way: a BenchlibError is one line in the rank's log and, from each
node's first rank, on the terminal the run was started from; anything else is a
traceback in the log. Both leave `rank<R>.failed` for the launcher, stop the local ranks
this process started, and exit at once (the error's status, else 1) rather than wait in a
collective for ranks that will never come. `Preempted` (SIGTERM between two steps, the
elastic worker) is not a failure: the ranks leave the group together and exit 75.

`Plain` is the worker of single, dp, ddp, allreduce and doctor: a function of
(args, env, device, backend) with the distributed flags, mp.spawn and tcp:// added;
the elastic and Lightning workers subclass `Worker` in their own modules."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from benchlib.config.choices import DEFAULT_PORT
from benchlib.config.flags import add_config_flags
from benchlib.config.training import TrainingConfig
from benchlib.distributed.device import choose_backend, device_for, uses_cuda
from benchlib.distributed.env import DistEnv, from_tcp, resolve
from benchlib.distributed.group import barrier_and_destroy, init
from benchlib.errors import PREEMPTED_EXIT_CODE, BenchlibError, ConfigError, Preempted
from benchlib.launch import protocol

# Faults tests/test_launch.py injects through the environment (never through the
# user-facing flags): rank 1 aborts once just before joining the process group, as a crash
# inside init would (a path marks that it did: `Plain.work`), or after the result is
# written (`run_rank`).
ABORT_IN_INIT_ONCE = "BENCHLIB_TEST_ABORT_IN_INIT_ONCE"
ABORT_AT_EXIT = "BENCHLIB_TEST_ABORT_AT_EXIT"


class Rank(Protocol):
    """Who this process is, as far as the bootstrap needs to know."""

    rank: int
    world_size: int
    local_rank: int


@dataclass
class Early:
    """A rank known before its launcher's layout is checked (enough to open its log)."""

    rank: int
    local_rank: int
    world_size: int = 0


class Worker:
    """One worker's part of the bootstrap. Subclasses set `prog` and `parser()` and
    `work()`; the other hooks default to what most workers need."""

    prog = "benchlib.workers"
    terminal = None  # set by run_rank: where the run was started, when output goes to a log

    def parser(self) -> argparse.ArgumentParser:
        raise NotImplementedError

    def check(self, args: argparse.Namespace) -> None:
        """Bad input that needs no rank: raise a BenchlibError (exit 2, one line)."""

    def find(self, args: argparse.Namespace) -> Rank | None:
        """This process's rank, from its launcher; None when it started its ranks itself
        and they are done (mp.spawn)."""
        raise NotImplementedError

    def place(self, args: argparse.Namespace, rank: Any) -> Any:
        """What a rank checks alone, after its output goes to its log."""
        return rank

    def describe(self, args: argparse.Namespace, rank: Any) -> str:
        """The end of the rank banner: started how, from where."""
        return ""

    def work(self, args: argparse.Namespace, rank: Any) -> dict | None:
        """Join the others and do the work; rank 0 returns the result."""
        raise NotImplementedError

    def leave(self) -> None:
        """After the work: every rank leaves the process group together."""
        barrier_and_destroy()

    def stop_local_ranks(self) -> None:
        """On a failure: stop the ranks this process started itself (Lightning's launcher)."""


def refuse(prog: str, error: BenchlibError) -> int:
    print(f"{prog}: {error}", file=sys.stderr, flush=True)
    return error.status()


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The command line, over the parameters of `--config run.json` (what a study's launch
    writes: benchlib.launch.protocol): a flag given on the command line wins."""
    parser.add_argument("--config", help="a run.json ({\"params\": {name: value}}) whose "
                        "parameters are the defaults; flags given as well win")
    given = parser.parse_known_args(argv)[0].config
    if not given:
        return parser.parse_args(argv)
    parser.set_defaults(**checked_params(parser, protocol.read_run_config(given), given))
    args = parser.parse_args(argv)
    for group in parser._mutually_exclusive_groups:  # argparse checks the command line only
        chosen = [a.dest for a in group._group_actions if getattr(args, a.dest)]
        if len(chosen) > 1:
            raise ConfigError(chosen[1], f"cannot go with {chosen[0]} (from {given} and the "
                              "command line): give one")
    return args


def checked_params(parser: argparse.ArgumentParser, params: dict[str, Any],
                   path: str) -> dict[str, Any]:
    """Every name a parameter of this worker, every value one it allows, converted as
    the command line would convert it (an int parameter refuses 2.5)."""
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", "config")}
    checked = {}
    for name, value in params.items():
        action = actions.get(name)
        if action is None:
            raise ConfigError("config", f"{path}: {name!r} is not a parameter of "
                              f"{parser.prog}; it takes {', '.join(sorted(actions))}")
        flag = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                                   argparse.BooleanOptionalAction))
        if flag != isinstance(value, bool):
            raise ConfigError(name, f"{value!r} (in {path}) must be "
                              f"{'true or false' if flag else 'a value, not true or false'}")
        if not flag and value is not None and action.type is not None:
            try:
                value = action.type(value if isinstance(value, dict) else str(value))
            except (ValueError, argparse.ArgumentTypeError):
                raise ConfigError(name, f"{value!r} (in {path}) is not "
                                  f"{getattr(action.type, '__name__', 'valid')}") from None
        if action.choices is not None and value not in action.choices:
            raise ConfigError(name, f"{value!r} (in {path}) is not one of "
                              f"{', '.join(map(str, action.choices))}")
        checked[name] = value
    return checked


def run(worker: Worker, argv: list[str] | None = None) -> int:
    try:
        args = parse(worker.parser(), argv)
        worker.check(args)
        found = worker.find(args)
    except BenchlibError as e:
        return refuse(worker.prog, e)
    return 0 if found is None else run_rank(worker, args, found)


def run_rank(worker: Worker, args: argparse.Namespace, found: Rank) -> int:
    log_dir = getattr(args, "log_dir", None)
    if log_dir and found.local_rank == 0:
        worker.terminal = os.fdopen(os.dup(2), "w", buffering=1)
    protocol.redirect_output(log_dir, found.rank)
    rank = found
    try:
        rank = worker.place(args, found)
        print(protocol.banner(rank.rank, rank.world_size, rank.local_rank,
                              worker.describe(args, rank)), flush=True)
        result = worker.work(args, rank)
    except Preempted as p:
        print(f"{p}; exiting with code {PREEMPTED_EXIT_CODE}: run again with --resume", flush=True)
        worker.leave()  # every rank stopped at the same step boundary
        return PREEMPTED_EXIT_CODE
    except BaseException as e:  # noqa: BLE001 - every failure ends the same way, at once
        fail(worker, log_dir, rank.rank, e)
    worker.leave()
    if rank.rank == 0 and result is not None:
        protocol.write_result(getattr(args, "result", None), result)
    if os.environ.get(ABORT_AT_EXIT) and rank.rank == 1:
        os.abort()  # what gloo's teardown crash looks like (tests)
    return 0


def fail(worker: Worker, log_dir: str | None, rank: int, error: BaseException) -> None:
    """One line for a BenchlibError (also on the terminal), a traceback for anything else;
    the rank's failure marker; the local ranks it started stopped; out at once."""
    if isinstance(error, BenchlibError):
        line = f"{worker.prog}: {error}"
        print(line, file=sys.stderr, flush=True)
        if worker.terminal is not None:
            print(line, file=worker.terminal, flush=True)
    else:
        traceback.print_exception(error)
        if worker.terminal is not None:  # its last line where the run was started too
            print(f"{worker.prog}: rank {rank}: {protocol.error_line(error)}",
                  file=worker.terminal, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    protocol.mark_failed(log_dir, rank, error)
    worker.stop_local_ranks()
    os._exit(error.status() if isinstance(error, BenchlibError) else 1)


# ---------------------------------------------------------------- the plain workers

Main = Callable[[argparse.Namespace, DistEnv, Any, str], dict[str, Any]]


@dataclass(frozen=True)
class Later:
    """A worker's work, `module.name`, imported only when a rank starts it: the worker's
    `--help` and its refusal of bad flags then import no torch. A value, not a closure, so
    that it travels to the ranks mp.spawn starts."""

    module: str
    name: str

    def __call__(self, args: argparse.Namespace, env: DistEnv, device: Any,
                 backend: str) -> dict[str, Any]:
        return getattr(importlib.import_module(self.module), self.name)(args, env, device,
                                                                        backend)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("distributed")
    add_config_flags(g, TrainingConfig, only=("device", "backend"))
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


class Plain(Worker):
    """A function of (args, env, device, backend) that returns rank 0's result, as a
    worker: the distributed flags, mp.spawn, tcp://, joining the group with a timeout."""

    def __init__(self, main: Main, parser: argparse.ArgumentParser | None = None,
                 check: Callable[[argparse.Namespace], None] | None = None):
        self.main, self._parser, self._check = main, parser, check
        if parser is not None:
            self.prog = parser.prog

    def parser(self) -> argparse.ArgumentParser:
        add_arguments(self._parser)
        return self._parser

    def check(self, args: argparse.Namespace) -> None:
        """The worker's own checks of its flags first (they need no torch), then gpu without
        CUDA, nccl on CPU: one line here, not a traceback per spawned rank."""
        if self._check is not None:
            self._check(args)
        choose_backend("cuda" if uses_cuda(args.device) else "cpu", args.backend)

    def find(self, args: argparse.Namespace) -> DistEnv | None:
        if args.spawn:
            import torch.multiprocessing as mp

            mp.spawn(_spawned, args=(self.main, self.prog, args), nprocs=args.spawn, join=True)
            return None
        if args.init_method:
            return from_tcp(args.init_method, args.rank, args.world_size, args.local_rank)
        return resolve(nproc_per_node=args.nproc_per_node,
                       local_rank=int(os.environ.get("LOCAL_RANK", 0)))

    def describe(self, args: argparse.Namespace, env: DistEnv) -> str:
        return f"from {env.source}, master {env.master_addr}:{env.master_port}"

    def work(self, args: argparse.Namespace, env: DistEnv) -> dict | None:
        device = device_for(args.device, env.local_rank)
        backend = choose_backend(device.type, args.backend)
        once = os.environ.get(ABORT_IN_INIT_ONCE)
        if once and env.rank == 1 and not Path(once).exists():
            Path(once).touch()
            os.abort()  # what an init crash inside gloo/TCPStore looks like (SIGABRT)
        if env.world_size > 1 or args.group_of_one:
            init(env, backend, args.timeout)
            print(f"{protocol.JOINED} ({backend})", flush=True)
        return self.main(args, env, device, backend)


def _spawned(local_rank: int, main: Main, prog: str, args: argparse.Namespace) -> None:
    worker = Plain(main)  # (a parser does not travel to a spawned process; it is not needed)
    worker.prog = prog
    env = DistEnv(local_rank, local_rank, args.spawn, args.spawn, 0, "127.0.0.1",
                  args.master_port, "mp_spawn")
    run_rank(worker, args, env)


def entry(main: Main, parser: argparse.ArgumentParser, argv: list[str] | None = None,
          check: Callable[[argparse.Namespace], None] | None = None) -> int:
    """Run `main` as a plain worker: parse, check, then this process's rank(s)."""
    return run(Plain(main, parser, check), argv)
