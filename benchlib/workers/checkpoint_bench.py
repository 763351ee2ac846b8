"""`python -m benchlib.workers.checkpoint_bench`: save and restore one model's training state
in each checkpoint mode, timed (see benchlib.trainers.checkpoint_bench).

    torchrun --standalone --nproc-per-node 2 -m benchlib.workers.checkpoint_bench \\
        --model gpt-tiny --model-args '{"n_layer": 4, "n_embd": 256}' --device cpu \\
        --checkpoint-path /scratch/ckpt --result bench.json
"""

from __future__ import annotations

import argparse

from benchlib.config.checkpoint import CheckpointConfig
from benchlib.config.choices import CHECKPOINT_MODES
from benchlib.config.flags import add_config_flags, add_piece_flags
from benchlib.config.model_data import ModelDataConfig
from benchlib.errors import ConfigError
from benchlib.workers.bootstrap import Later, entry


def modes(text: str) -> list[str]:
    """`--modes a,b`: checkpoint modes, each one of CHECKPOINT_MODES."""
    found = [m.strip() for m in text.split(",") if m.strip()]
    wrong = [m for m in found if m not in CHECKPOINT_MODES]
    if not found or wrong:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated, each one of "
                                         f"{', '.join(CHECKPOINT_MODES)}")
    return found


def check(args: argparse.Namespace) -> None:
    for name in ("saves", "restores"):
        if getattr(args, name) < 1:
            raise ConfigError(name, f"must be >= 1, got {getattr(args, name)}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchlib.workers.checkpoint_bench",
                                description="save and restore a model's state in each mode")
    add_config_flags(p, ModelDataConfig, only=["model", "model_args", "seed"])
    add_piece_flags(p, CheckpointConfig, only=["checkpoint_path"])
    p.add_argument("--modes", type=modes, default=list(CHECKPOINT_MODES),
                   help=f"comma-separated checkpoint modes (default {','.join(CHECKPOINT_MODES)})")
    p.add_argument("--strategy", choices=["ddp", "fsdp2"], default="ddp",
                   help="ddp: the state replicated on every rank; fsdp2: sharded over them")
    p.add_argument("--saves", type=int, default=3, help="saves per mode")
    p.add_argument("--restores", type=int, default=3, help="restores per mode")
    return p


if __name__ == "__main__":
    raise SystemExit(entry(Later("benchlib.trainers.checkpoint_bench", "bench"), parser(),
                           check=check))
