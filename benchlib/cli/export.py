"""`benchlib export RESULT_SET --to mlflow|tensorboard|bmf|github-action-benchmark`: a
result set's ok records where teams already look, with their intervals, n and testbed
(benchlib/export/, docs/export.md)."""

from __future__ import annotations

import benchlib.cli.common as common


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="a result set to MLflow, TensorBoard, Bencher (BMF) or "
                       "github-action-benchmark, intervals, n and testbed kept")
    p.add_argument("result_set", metavar="RESULT_SET",
                   help="a result set's label, or a folder (outputs/ or results/: its newest set)")
    p.add_argument("--to", metavar="TARGET",
                   help="mlflow, tensorboard, bmf or github-action-benchmark")
    p.add_argument("--out", help="the folder a file target writes (default: "
                   "outputs/export/<label>/<target>)")
    p.add_argument("--tracking-uri", help="--to mlflow: the tracking server, http(s)://HOST:PORT "
                   "(default: $MLFLOW_TRACKING_URI)")
    p.add_argument("--table", action="append", help="only this parameter table (repeatable)")
    p.add_argument("--study", action="append", help="only this study or table (repeatable)")
    p.add_argument("--testbed", help="only records on this testbed (its id or the id's start); "
                   "bmf and github-action-benchmark take one testbed a file")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from benchlib.export import targets

    lines = targets.export(args.result_set, args.to, common.outputs(args), args.out,
                           args.tracking_uri, args.table, args.study, args.testbed)
    print("\n".join(lines))
    return 0
