"""`python -m benchlib.gpucheck.io_grid [--variants V,..] [--modes M,..] [--workers N,..]
[--launches L --summary FILE] IO_ARGS...`: the GPU check's IO steps, `benchlib io IO_ARGS
--variant V --mode M --num-workers N` for each setting in turn (a record each, as the
command writes it alone).

One launch runs every setting in one process: on a lent H100 host a process start cost
5-13 s before it measured anything (`import torch` alone took 5.3 s there on 2026-11-27),
against 1-3 s of measuring a setting. Each setting still gets its own DataLoaders,
warm-up steps and repeats; what the settings share is the process, its CUDA context and
its imports.

`--launches L` (5 or more for an interval) makes it an interleaved A/B: L launches, each
its own process, one after another, each running every setting once in an order rotated
by one setting a launch (no setting always first). Per setting: the median over launches,
p10-p90 and a 95% interval; per variant against the first one at the same mode and
worker count: the ratio of medians with a bootstrap interval over launches and the one
verdict rule (benchlib.core.stats). Printed, and written to `--summary` as JSON.
Repeats inside one process share its luck; launches do not, and on that H100 the same IO
setting moved by -39% to +58% between separate invocations.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchlib import atomic
from benchlib.cli.main import main as benchlib_cli
from benchlib.core.stats import DEFAULT_THRESHOLD, direction_verdict, ratio_interval, summarize


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="io_grid", description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", help="comma-separated --variant values (default: IO_ARGS')")
    p.add_argument("--modes", default="train,traverse", help="comma-separated --mode values")
    p.add_argument("--workers", default="0,4", help="comma-separated --num-workers values")
    p.add_argument("--launches", type=int, default=1, help="launches, each its own process")
    p.add_argument("--rotate", type=int, default=0, help=argparse.SUPPRESS)  # a launch's turn
    p.add_argument("--summary", help="with --launches: write the summary here (JSON)")
    return p


def settings(args: argparse.Namespace) -> list[list[str]]:
    """Each setting's own flags, in order: variants, then modes, then worker counts."""
    variants = args.variants.split(",") if args.variants else [None]
    return [[*(["--variant", v] if v else []), "--mode", m, "--num-workers", w]
            for v, m, w in itertools.product(variants, args.modes.split(","),
                                             args.workers.split(","))]


def run_launch(args: argparse.Namespace, io_args: list[str]) -> int:
    """Every setting once, in this process, starting at setting `rotate`."""
    grid = settings(args)
    turn = args.rotate % len(grid)
    return max(benchlib_cli(["io", *io_args, *flags]) for flags in grid[turn:] + grid[:turn])


def _records(output: str) -> list[dict[str, Any]]:
    from benchlib.records import results

    return [results.read_record(Path(line[len("record: "):]))
            for line in output.splitlines() if line.startswith("record: ")]


def _name(params: dict[str, Any]) -> tuple[str, str]:
    return params["variant"], f"{params['mode']}_w{params['num_workers']}"


def summary(launches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The launches' records as settings (median, p10-p90, 95% interval over launches)
    and A/B ratios of each variant against the first, at the same mode and workers."""
    values: dict[tuple[str, str], list[float]] = {}
    for records in launches:
        for r in records:
            values.setdefault(_name(r["params"]), []).append(r["metrics"]["samples_per_s"])
    out: dict[str, Any] = {"launches": len(launches), "settings": {}, "ab": []}
    for (variant, setting), vals in values.items():
        out["settings"][f"{variant}_{setting}"] = summarize(vals, "samples_per_s")
    variants = list(dict.fromkeys(v for v, _ in values))
    for variant, setting in values:
        base = (variants[0], setting)
        if variant == variants[0] or base not in values:
            continue
        r = ratio_interval([[v] for v in values[base]], [[v] for v in values[(variant, setting)]])
        n = min(len(values[base]), len(values[(variant, setting)]))
        out["ab"].append({"new": variant, "base": variants[0], "setting": setting,
                          "ratio": r.ratio, "low": r.low, "high": r.high, "launches": n,
                          "verdict": direction_verdict(r.low, r.high, DEFAULT_THRESHOLD, n,
                                                      at_boundary=r.at_boundary)})
    return out


def ab_lines(s: dict[str, Any]) -> list[str]:
    lines = []
    for a in s["ab"]:
        interval = (f"95% interval {a['low']:.2f}-{a['high']:.2f}" if a["low"] is not None
                    else "no interval below 5 launches")
        lines.append(f"A/B {a['new']} / {a['base']}, {a['setting']}: {a['ratio']:.2f}x "
                     f"({interval}, {a['launches']} launches): {a['verdict']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args, io_args = parser().parse_known_args(argv)
    if args.launches < 1 or (args.launches > 1 and not args.summary):
        why = (f"launches: must be >= 1, got {args.launches}" if args.launches < 1 else
               "summary: --launches above 1 needs a --summary file to write")
        print(f"io_grid: {why}", file=sys.stderr)
        return 2
    if args.launches == 1:
        return run_launch(args, io_args)
    launches, code = [], 0
    for turn in range(args.launches):
        flags = [f"--{k}={getattr(args, k)}" for k in ("modes", "workers")]
        flags += [f"--variants={args.variants}"] if args.variants else []
        done = subprocess.run([sys.executable, "-m", "benchlib.gpucheck.io_grid", *flags,
                               "--rotate", str(turn), *io_args], capture_output=True, text=True)
        print(done.stdout, end="", flush=True)
        print(done.stderr, end="", file=sys.stderr, flush=True)
        code = max(code, done.returncode)
        launches.append(_records(done.stdout))
    result = summary(launches)
    atomic.write_json(Path(args.summary), result)
    print("\n".join(ab_lines(result)))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
