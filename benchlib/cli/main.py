"""`python -m benchlib ...`: data, env, sweep, run, report, compare, export, io, maxbatch,
allreduce, doctor, calibrate, overhead, fp8-layers, project. The commands live beside their
flags, by family: workbook_commands (the workbook's own), study_commands (a study's one
setting: io, maxbatch), distributed_commands (allreduce, doctor), benchmark_commands
(calibrate, overhead), fp8_layers, diagnose, export and project; this module builds the
parser and runs one.

Bad input prints one line naming the parameter and what is allowed, and exits 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

import benchlib.cli.benchmark_commands as benchmark_commands
import benchlib.cli.diagnose as diagnose
import benchlib.cli.distributed_commands as distributed_commands
import benchlib.cli.export as export
import benchlib.cli.fp8_layers as fp8_layers
import benchlib.cli.store_commands as store_commands
import benchlib.cli.study_commands as study_commands
import benchlib.cli.workbook_commands as workbook_commands
from benchlib.errors import BenchlibError, Terminated

# the commands that measure and keep no checkpoint: SIGTERM (a Slurm job's end) stops their
# ranks and exits 75, "run it again", as a preempted training run does
ENDED_BY_SIGTERM_WITH_75 = ("io", "maxbatch", "allreduce", "doctor")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchlib", description="Measure PyTorch training performance; run the workbook.")
    parser.add_argument("--allocator", choices=["default", "tuned", "jemalloc", "tcmalloc"],
                        help="restart under this memory allocator (see benchlib/core/allocator.py); "
                        "sweeps pass it on to every kernel")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    workbook_commands.add_parsers(sub)
    for family in (study_commands, distributed_commands, benchmark_commands, store_commands):
        family.add_parsers(sub)
    diagnose.add_parser(sub)
    export.add_parser(sub)
    fp8_layers.add_parser(sub)
    # listed here for --help; main() hands its arguments to benchlib.cli.project
    sub.add_parser("project", help="scaling projection to more devices and nodes, and its "
                   "check against seed 003 (project --help)")
    return parser


def _restart_with_allocator(name: str, argv: list[str]) -> None:
    """Allocator settings are read at process start: start this command again with them."""
    from benchlib.core import allocator

    if os.environ.get("BENCHLIB_ALLOCATOR") == name:
        return  # already restarted
    env = {**os.environ, **allocator.environment_for(name), "BENCHLIB_ALLOCATOR": name}
    os.execve(sys.executable, [sys.executable, "-m", "benchlib", *argv], env)


def _run(args: argparse.Namespace) -> int:
    """The command; for those of ENDED_BY_SIGTERM_WITH_75, SIGTERM raises Terminated in the
    main thread meanwhile, so the launch stops its ranks and the command ends with one line
    and 75 (a second SIGTERM is not waited for: it kills; forked DataLoader workers leave
    it to the command, as a trainer's do). The handler before is restored (main() also
    runs inside other programs, the tests)."""
    if args.command not in ENDED_BY_SIGTERM_WITH_75 or \
            threading.current_thread() is not threading.main_thread():
        return args.func(args)

    command = os.getpid()

    def handler(signum, frame) -> None:
        if os.getpid() != command:  # a forked DataLoader worker: its parent stops it
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated()

    before = signal.signal(signal.SIGTERM, handler)
    try:
        return args.func(args)
    finally:
        signal.signal(signal.SIGTERM, before)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["project"]:  # its own parser takes every option
        import benchlib.cli.project as projection_cli

        return projection_cli.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.allocator:
            _restart_with_allocator(args.allocator, argv)
        return _run(args)
    except BenchlibError as e:
        print(f"benchlib {args.command}: {e}", file=sys.stderr)
        return e.status()
    except KeyboardInterrupt:
        print(f"benchlib {args.command}: interrupted", file=sys.stderr)
        return 130
