"""`python -m benchlib.workers.ddp`: ddp training (see benchlib.trainers.ddp)."""

from benchlib.trainers.ddp import check_args, parser, train
from benchlib.workers.bootstrap import entry

if __name__ == "__main__":
    raise SystemExit(entry(train, parser("ddp"), check=check_args))
