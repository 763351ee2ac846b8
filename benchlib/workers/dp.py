"""`python -m benchlib.workers.dp`: dp training (see benchlib.trainers.ddp)."""

from benchlib.trainers.ddp import parser, train
from benchlib.workers.common import entry

if __name__ == "__main__":
    raise SystemExit(entry(train, parser("dp")))
