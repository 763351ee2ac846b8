"""`python -m benchlib.gpucheck.io_grid [--modes M,..] [--workers N,..] IO_ARGS...`: the GPU
check's IO steps, `benchlib io IO_ARGS --mode M --num-workers N` for each mode and worker
count in turn, in one process (a record each, as the command writes it alone).

Why one process: on a lent H100 host a process start costs 5-13 s before it measures
anything (`import torch` alone took 5.3 s there on 2026-11-27, an optimizer's first use
2 s more), and the check ran twelve IO processes of 1-3 s of measuring each. Each
setting still gets its own DataLoaders, warm-up steps and repeats; what the settings
share is the process, its CUDA context and its imports.
"""

from __future__ import annotations

import argparse

from benchlib.cli.main import main as benchlib_cli


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="io_grid", description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", default="train,traverse", help="comma-separated --mode values")
    p.add_argument("--workers", default="0,4", help="comma-separated --num-workers values")
    args, io_args = p.parse_known_args(argv)
    codes = [benchlib_cli(["io", *io_args, "--mode", mode, "--num-workers", workers])
             for mode in args.modes.split(",") for workers in args.workers.split(",")]
    return max(codes)


if __name__ == "__main__":
    raise SystemExit(main())
