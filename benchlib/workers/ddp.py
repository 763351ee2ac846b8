"""`python -m benchlib.workers.ddp`: ddp training (see benchlib.trainer)."""

from benchlib.trainer import main

if __name__ == "__main__":
    raise SystemExit(main("ddp"))
