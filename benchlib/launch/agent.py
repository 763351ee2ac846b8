"""`python -m benchlib.launch.agent ARGS`: torchrun (`torch.distributed.run ARGS`) whose
exit status says preemption, so that `srun`, Slurm and the rendered script see it.

torchrun stopped by SIGTERM (Slurm's notice before it ends a job) exits 1 with a
SignalException, and ranks stopped at a checkpoint with PREEMPTED_EXIT_CODE (75,
EX_TEMPFAIL; the others, ended by torchrun's SIGTERM, -15) after the last restart make it
exit 1 with a ChildFailedError: both read as a crash from outside. Here both exit 75
("run it again"), saying "checkpoint" only when a rank said it wrote one (the elastic
trainer does, allreduce has none: protocol.PREEMPTED_NOTE). A node that never joins the
rendezvous ends it with one line naming the endpoint and what to check, exit 1, not
torchrun's RendezvousTimeoutError traceback. Anything else is torchrun's own behaviour
and exit status.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from benchlib.errors import PREEMPTED_EXIT_CODE
from benchlib.launch import protocol


def preempted(exit_codes: list[int]) -> bool:
    """A rank exited 75 and every other failed one either did too or was ended by the
    SIGTERM torchrun sends the rest once one has stopped (never the cause)."""
    return PREEMPTED_EXIT_CODE in exit_codes and \
        all(c in (PREEMPTED_EXIT_CODE, -signal.SIGTERM) for c in exit_codes)


def main(argv: list[str] | None = None) -> int:
    """torchrun with `argv`; where the ranks say what they checkpointed: the launcher's
    file (PREEMPTED_NOTE set), else one of its own for this run."""
    if os.environ.get(protocol.PREEMPTED_NOTE):
        return _run(argv, os.environ[protocol.PREEMPTED_NOTE])
    own = tempfile.mkdtemp(prefix="benchlib-agent-")
    os.environ[protocol.PREEMPTED_NOTE] = str(Path(own) / protocol.PREEMPTED_NOTE_FILE)
    try:
        return _run(argv, os.environ[protocol.PREEMPTED_NOTE])
    finally:
        shutil.rmtree(own, ignore_errors=True)


def _run(argv: list[str] | None, note: str) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousTimeoutError
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except SignalException as e:
        if e.sigval != signal.SIGTERM:
            raise
        did, todo = protocol.after_preemption(protocol.checkpoint_note(note))
        print(f"torchrun: stopped by SIGTERM (preempted); {did}; exit {PREEMPTED_EXIT_CODE}: "
              f"{todo}", file=sys.stderr)
        return PREEMPTED_EXIT_CODE
    except ChildFailedError as e:
        if not preempted([f.exitcode for f in e.failures.values()]):
            raise
        did, todo = protocol.after_preemption(protocol.checkpoint_note(note))
        print(f"torchrun: every failed rank was preempted (exit {PREEMPTED_EXIT_CODE}); {did}: "
              f"{todo}", file=sys.stderr)
        return PREEMPTED_EXIT_CODE
    except RendezvousTimeoutError:
        print(f"torchrun: {_missing_nodes(argv)}", file=sys.stderr)
        return 1
    return 0


def _missing_nodes(argv: list[str] | None) -> str:
    """The one line for a rendezvous that timed out, from torchrun's own reading of `argv`."""
    from torch.distributed.run import parse_args

    args = parse_args(sys.argv[1:] if argv is None else argv)
    conf = dict(kv.split("=", 1) for kv in args.rdzv_conf.split(",") if "=" in kv)
    return protocol.missing_nodes(args.nnodes, args.rdzv_endpoint,
                                  conf.get("join_timeout", "600"))


if __name__ == "__main__":
    raise SystemExit(main())
