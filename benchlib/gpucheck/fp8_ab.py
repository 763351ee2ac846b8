"""The GPU check's FP8 A/B (part 6): notebook 50's float8 row run as the notebook runs it
(studies/transformer_training.run: its bf16 twins interleaved on the same seeds, the one
verdict rule, compile seconds apart from the steady step), its metrics and the A/B's
sentence written where the check reads them.

    python -m benchlib.gpucheck.fp8_ab TABLE PRECISION FP8_FILTER --repeats 3 \\
        --outputs OUT --result FILE

TABLE's one row of that precision and filter (a parameter table, read as a sweep reads
it), with `repeats` launches a side."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from benchlib import atomic
from benchlib.errors import UsageError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchlib.gpucheck.fp8_ab", description=__doc__.split("\n\n")[0])
    p.add_argument("table", help="a parameter table of notebook 50's")
    p.add_argument("precision", help="the row's FP8 recipe")
    p.add_argument("fp8_filter", help="the row's filter")
    p.add_argument("--repeats", type=int, help="launches a side (default: the row's)")
    p.add_argument("--outputs", required=True, help="the check's folder: logs go under it")
    p.add_argument("--result", required=True, help="the JSON file of its metrics")
    args = p.parse_args(argv)
    from benchlib.gpucheck.steps import table_rows
    from benchlib.studies import transformer_training

    rows = [c for c in table_rows(args.table)
            if (c.precision, c.fp8_filter) == (args.precision, args.fp8_filter)]
    if len(rows) != 1:
        print(f"fp8_ab: {args.table} has {len(rows)} rows of {args.precision} with fp8_filter "
              f"{args.fp8_filter}; it must have one", file=sys.stderr)
        return 2
    cfg = replace(rows[0], repeats=args.repeats or rows[0].repeats)
    os.environ["BENCHLIB_OUTPUTS"] = args.outputs
    try:
        result = transformer_training.run(cfg, run_id=f"gpu-check-fp8-{cfg.precision}")
    except UsageError as e:
        print(f"fp8_ab: {e}", file=sys.stderr)
        return 2
    answer = transformer_training.describe(cfg, result)
    print(answer, flush=True)
    atomic.write_json(args.result, {"metrics": {**result.metrics, "answer": answer.splitlines()[0]},
                                    "details": result.details})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
