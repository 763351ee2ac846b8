"""`python -m benchlib.workers.single`: single training (see benchlib.trainers.ddp)."""

from benchlib.trainers.ddp import check_args, parser, train
from benchlib.workers.bootstrap import entry

if __name__ == "__main__":
    raise SystemExit(entry(train, parser("single"), check=check_args))
