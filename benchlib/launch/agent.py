"""`python -m benchlib.launch.agent ARGS`: torchrun (`torch.distributed.run ARGS`) whose
exit status says preemption, so that `srun`, Slurm and the rendered script see it.

torchrun stopped by SIGTERM (Slurm's notice before it ends a job) exits 1 with a
SignalException, and ranks stopped at a checkpoint with PREEMPTED_EXIT_CODE (75,
EX_TEMPFAIL; the others, ended by torchrun's SIGTERM, -15) after the last restart make it
exit 1 with a ChildFailedError: both read as a crash from outside. Here both exit 75
("run it again to resume"); anything else is torchrun's own behaviour and exit status.
"""

from __future__ import annotations

import signal
import sys

from benchlib.errors import PREEMPTED_EXIT_CODE


def preempted(exit_codes: list[int]) -> bool:
    """A rank exited 75 and every other failed one either did too or was ended by the
    SIGTERM torchrun sends the rest once one has stopped (never the cause)."""
    return PREEMPTED_EXIT_CODE in exit_codes and \
        all(c in (PREEMPTED_EXIT_CODE, -signal.SIGTERM) for c in exit_codes)


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except SignalException as e:
        if e.sigval != signal.SIGTERM:
            raise
        print(f"torchrun: stopped by SIGTERM (preempted); the ranks were told to checkpoint; "
              f"exit {PREEMPTED_EXIT_CODE}: run it again to resume", file=sys.stderr)
        return PREEMPTED_EXIT_CODE
    except ChildFailedError as e:
        if not preempted([f.exitcode for f in e.failures.values()]):
            raise
        print(f"torchrun: every failed rank was preempted (exit {PREEMPTED_EXIT_CODE}) and "
              "wrote a checkpoint: run it again to resume", file=sys.stderr)
        return PREEMPTED_EXIT_CODE
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
