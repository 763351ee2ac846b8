"""Every exception benchlib raises, in one place. One base class; the CLI prints its
message as one line and exits with its code. A message names the parameter (or file,
row, rank) first, then what is allowed or where to look."""

from __future__ import annotations

from pathlib import Path

# A process stopped by SIGTERM (Slurm's notice before it kills a job) after writing a
# checkpoint: not a failure, run it again to resume (EX_TEMPFAIL, "try again").
PREEMPTED_EXIT_CODE = 75


class BenchlibError(Exception):
    """Something benchlib could not do. The message is one line meant for the user."""

    exit_code = 1

    def status(self) -> int:
        """The exit status a command ends with on this error."""
        return self.exit_code


class UsageError(BenchlibError):
    """Bad input: the message names the file, row or parameter and what is allowed."""

    exit_code = 2


class ConfigError(UsageError, ValueError):
    """A study parameter out of range; `field` is the parameter's name."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


class RecordError(BenchlibError, ValueError):
    """A result record (or what a notebook published for one) that cannot be stored as
    given: a bad status, a metric that clashes with a parameter, a value JSON cannot hold."""


class LaunchError(BenchlibError):
    """A rank failed or the run timed out; the message names where to look."""

    def __init__(self, message: str, rank: int | None = None, host: str | None = None,
                 exit_code: int | None = None, log_path: Path | None = None):
        self.rank, self.host, self.exit_code, self.log_path = rank, host, exit_code, log_path
        super().__init__(message)

    def status(self) -> int:
        """75 when the ranks were preempted (run it again to resume), else 1: never the
        rank's own code, which is None after a timeout, 0 for a missing result, or negative."""
        return PREEMPTED_EXIT_CODE if self.exit_code == PREEMPTED_EXIT_CODE else 1


class CheckpointError(BenchlibError):
    """A save that failed (a full disk, a quota, a write error): the message names the
    path, and for want of space the bytes the save needed and the space free."""


class StoreFailed(BenchlibError):
    """The object store a row reads stopped answering during the row: the row fails,
    naming the store (the next row starts the workbook's store again)."""


class RankError(BenchlibError):
    """A rank found its run in a state it cannot go on from (placed at another rank than
    the launcher said, a local rank it started failed, a collective gave a wrong sum)."""


class InjectedFailure(Exception):
    """A failure asked for on purpose (`--fail-at-step`): notebook 35 and the tests. Not a
    BenchlibError on purpose: it must fail the way an unexpected error does (traceback in
    the rank's log, exit code 1), since that is what it stands in for."""


class SlurmError(BenchlibError):
    """sbatch / squeue / scontrol said no."""


class Terminated(BenchlibError):
    """SIGTERM (Slurm's notice before it ends a job) reached a command that keeps no
    checkpoint (io, allreduce, doctor): what it started is stopped, nothing is recorded, and it
    exits PREEMPTED_EXIT_CODE like every preempted run: run it again."""

    exit_code = PREEMPTED_EXIT_CODE

    def __init__(self) -> None:
        super().__init__("stopped by SIGTERM (preempted): what it started was stopped, nothing "
                         f"was recorded and there is no checkpoint; exit {PREEMPTED_EXIT_CODE}: "
                         "run it again")


class Preempted(Exception):
    """All ranks stopped at a step boundary after SIGTERM; the checkpoint is written.
    Not a failure: the worker exits with PREEMPTED_EXIT_CODE, run it again to resume."""

    def __init__(self, step: int, path: Path):
        self.step, self.path = step, path
        super().__init__(f"preempted at step {step}: checkpoint {path}")


class UnreadableRecord(BenchlibError):
    """A file under results/ that is not valid JSON or not a record: skipped with a
    warning by whatever reads many records, never fatal to them."""
