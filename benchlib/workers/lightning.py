"""`python -m benchlib.workers.lightning`: Lightning DDP training on one or more nodes,
started by torchrun, srun or Lightning's own launcher (see benchlib.trainers.lightning)."""

from benchlib.trainers.lightning import main

if __name__ == "__main__":
    raise SystemExit(main())
