"""`python -m benchlib.workers.fsdp2`: FSDP2 training, one rank per device, the model's
blocks sharded over the ranks (see benchlib.trainers.ddp and benchlib.distributed.fsdp)."""

from benchlib.trainers.ddp_flags import check_args, parser
from benchlib.workers.bootstrap import Later, entry

if __name__ == "__main__":
    # the trainer (and torch) only once the flags are read and checked
    raise SystemExit(entry(Later("benchlib.trainers.ddp", "train"), parser("fsdp2"),
                           check=check_args))
