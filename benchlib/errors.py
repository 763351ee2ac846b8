"""One base exception; the CLI prints its message as one line and exits with its code."""


class BenchlibError(Exception):
    """Something benchlib could not do. The message is one line meant for the user."""

    exit_code = 1


class UsageError(BenchlibError):
    """Bad input: the message names the file, row or parameter and what is allowed."""

    exit_code = 2


class ConfigError(UsageError, ValueError):
    """A study parameter out of range; `field` is the parameter's name."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


# A process stopped by SIGTERM (Slurm's notice before it kills a job) after writing a
# checkpoint: not a failure, run it again to resume (EX_TEMPFAIL, "try again").
PREEMPTED_EXIT_CODE = 75


class UnreadableRecord(BenchlibError):
    """A file under results/ that is not valid JSON or not a record: skipped with a
    warning by whatever reads many records, never fatal to them."""
