"""Benchmarks of benchlib itself: `benchlib calibrate` (its loop against a bare loop, its
clock against a synchronized wall clock, the fetch ceiling; `--ground-truth`: a known
delay recovered through the training worker) and `benchlib overhead` (the sweep's fixed
cost per row)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import benchlib.cli.common as common
from benchlib import paths
from benchlib.config.choices import DELAY_PATTERNS, DEVICES
from benchlib.errors import BenchlibError, UsageError


def cmd_calibrate(args) -> int:
    for name in ("steps", "rounds", "batch_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"{name}: must be >= 1, got {getattr(args, name)}")
    if args.ground_truth:
        return _ground_truth(args)
    if args.path:  # before minutes of measuring, not after
        from benchlib.data.manifest import describe

        args.path = str(paths.from_command_line(args.path))
        describe(args.path, "fashion-mnist")
    from benchlib.distributed.device import device_for  # torch: after the checks, which need none
    from benchlib.studies import calibrate

    device = device_for(args.device)
    shape = dict(model_name=args.model, batch_size=args.batch_size, steps=args.steps)
    if args.model == "lm":  # first: the two loops do the same arithmetic
        from benchlib.studies import calibrate_lm

        print(calibrate_lm.line(calibrate_lm.same_work(args.batch_size, device)))
    loop = calibrate.loop_overhead(device, rounds=args.rounds, **shape)
    clock = calibrate.event_vs_wall(device, rounds=max(args.rounds // 4, 5), **shape)
    fetch = calibrate.fetch_ceiling(args.path) if args.path else None
    print("\n".join(calibrate.report_lines(loop, fetch, clock)))
    if args.json:
        from benchlib import atomic

        atomic.write_json(Path(args.json), {"device": str(device), "loop": loop, "clock": clock,
                                            "fetch": fetch})
        print(f"figures: {args.json}")
    return 0


def _ground_truth(args) -> int:
    """`calibrate --ground-truth`: 1 and 2 ranks (2 only where there are 2 devices: on CPU,
    or 2 GPUs); exit 1 when a check misses."""
    import torch

    from benchlib.distributed.device import device_for
    from benchlib.studies import ground_truth

    device = device_for(args.device)  # gpu without CUDA: refused here, before any launch
    ranks = (1, 2) if device.type == "cpu" or torch.cuda.device_count() >= 2 else (1,)
    if ranks == (1,):
        print("ground truth: one GPU here, so 1 rank only")
    if not 0 < args.tolerance < 1:
        raise UsageError(f"tolerance: must be between 0 and 1 (0.02: 2%), got {args.tolerance}")
    patterns = tuple(p for p in args.patterns.split(",") if p)
    checks = ground_truth.ground_truth(device.type if device.type == "cpu" else "gpu",
                                    common.outputs(args) / "logs" / "calibrate-ground-truth",
                                    ranks, args.delay_ms, args.steps, patterns=patterns,
                                    tolerance=args.tolerance)
    print("\n".join(ground_truth.ground_truth_lines(checks)))
    if args.json:
        from benchlib import atomic

        atomic.write_json(Path(args.json), {"device": str(device), "ground_truth": checks})
        print(f"figures: {args.json}")
    return 0 if all(c["passed"] for c in checks) else 1


def cmd_overhead(args) -> int:
    """The sweep's fixed cost per row: a trivial notebook, `--rows` times."""
    import statistics
    import subprocess
    import tempfile

    from benchlib.runs import sweep
    from benchlib.runs.params import single_row

    if args.rows < 1:
        raise UsageError(f"rows: must be >= 1, got {args.rows}")
    notebook = Path(__file__).parents[1] / "resources" / "trivial.ipynb"
    with tempfile.TemporaryDirectory() as tmp:
        rows = [single_row(str(notebook), {"x": i}, "overhead") for i in range(args.rows)]
        summary = sweep.run_plan(rows, Path(tmp), progress=False)
        if summary.failed:
            raise BenchlibError(f"overhead: {summary.failed} trivial rows failed")
        per_row = sorted(summary.row_s)
        print(f"sweep (papermill API), {args.rows} rows: median {statistics.median(per_row):.3f} s "
              f"per row, p10 {per_row[len(per_row) // 10]:.3f}, max {per_row[-1]:.3f}, "
              f"mean {statistics.fmean(per_row):.3f}")
        if args.compare_cli:
            cli_s = []
            for i in range(3):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar", str(notebook),
                                f"{tmp}/cli{i}.ipynb", "-p", "x", str(i)],
                               check=True, capture_output=True)
                cli_s.append(time.perf_counter() - start)
            print(f"papermill CLI, 3 notebooks: median {statistics.median(cli_s):.3f} s each")
    return 0


def add_parsers(sub) -> None:
    """`calibrate` and `overhead`, on `sub` (argparse's subparsers)."""
    p = sub.add_parser("calibrate", help="benchmark: benchlib's loop vs a bare loop; fetch ceiling")
    p.add_argument("--device", default="cpu", choices=DEVICES)
    p.add_argument("--steps", type=int, default=50, help="steps per block")
    p.add_argument("--rounds", type=int, default=80, help="interleaved rounds")
    p.add_argument("--model", default="toynet", choices=["toynet", "resnet18", "resnet50", "lm"],
                   help="toynet: launch-bound; resnet18/50: compute-bound (224 px); lm: "
                   "benchlib's GPT, 4 x 256, 8,192 ids, 256 tokens (give --batch-size 8)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--path", help="data folder: also compare preload_batched with a plain copy")
    p.add_argument("--json", help="also write every figure here (JSON)")
    p.add_argument("--ground-truth", action="store_true",
                   help="instead: the training worker (1 and 2 ranks) with a known delay "
                   "injected in patterns (--patterns), its figures and the parent's clock "
                   "against the truth; --steps per epoch; exit 1 when one misses --tolerance")
    p.add_argument("--delay-ms", type=float, default=100.0,
                   help="--ground-truth: the delay injected into every step (default 100)")
    p.add_argument("--patterns", default=",".join(DELAY_PATTERNS),
                   help="--ground-truth: how the delay varies by step, epoch and rank, "
                   "comma-separated (default: all: " + ", ".join(DELAY_PATTERNS) + ")")
    p.add_argument("--tolerance", type=float, default=0.02,
                   help="--ground-truth: the largest error a check passes with (default 0.02)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("overhead", help="benchmark: the sweep's fixed cost per row")
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--compare-cli", action="store_true", help="also time the papermill CLI")
    p.set_defaults(func=cmd_overhead)
