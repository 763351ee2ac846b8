"""`python -m benchlib.workers.ddp`: ddp training (see benchlib.trainers.ddp)."""

from benchlib.trainers.ddp_flags import check_args, parser
from benchlib.workers.bootstrap import Later, entry

if __name__ == "__main__":
    # the trainer (and torch) only once the flags are read and checked
    raise SystemExit(entry(Later("benchlib.trainers.ddp", "train"), parser("ddp"),
                           check=check_args))
