"""`benchlib fp8-layers MODEL --batch-size B --seq-len T`: float8 training's per-layer
table at the model's own shapes (benchlib.trainers.fp8_layers), its flags generated from
config/fp8_layers.py; the table is kept where `fp8_filter: measured` reads it."""

from __future__ import annotations

from pathlib import Path

import benchlib.cli.common as common
from benchlib import atomic
from benchlib.cli.flags import add_config_flags, config_from
from benchlib.config.fp8_layers import Fp8LayersConfig


def cmd_fp8_layers(args) -> int:
    """Each distinct linear shape timed, bf16 against FP8; the table printed and kept."""
    from benchlib.trainers import fp8, fp8_layers

    common.outputs(args)
    cfg = config_from(args, Fp8LayersConfig)
    fp8.torchao()  # the [fp8] extra, before anything is built
    table = fp8_layers.measure(cfg)
    print(fp8_layers.text(table))
    print(f"table: {fp8_layers.write(table)} (fp8_filter: measured reads it)")
    if args.json:
        atomic.write_json(Path(args.json), table)
        print(f"figures: {args.json}")
    return 0


def add_parser(sub) -> None:
    """`fp8-layers`, on `sub` (argparse's subparsers)."""
    p = sub.add_parser("fp8-layers", help="float8 training per linear at the model's own "
                       "shapes: bf16 against FP8, forward and both backward GEMMs, compiled")
    add_config_flags(p, Fp8LayersConfig, positional=("model",))
    p.add_argument("--json", help="also write the table here (JSON)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_fp8_layers)
