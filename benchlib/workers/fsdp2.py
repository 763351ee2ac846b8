"""`python -m benchlib.workers.fsdp2`: FSDP2 training, one rank per device, the model's
blocks sharded over the ranks (see benchlib.trainers.ddp and benchlib.distributed.fsdp)."""

from benchlib.trainers.ddp import check_args, parser, train
from benchlib.workers.bootstrap import entry

if __name__ == "__main__":
    raise SystemExit(entry(train, parser("fsdp2"), check=check_args))
