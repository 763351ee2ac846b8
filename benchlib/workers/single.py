"""`python -m benchlib.workers.single`: single training (see benchlib.trainer)."""

from benchlib.trainer import main

if __name__ == "__main__":
    raise SystemExit(main("single"))
