"""The workbook's commands: data, env, sweep, slurm-task, slurm-script, run, report,
compare (each command's flags beside what it does)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

import benchlib.cli.common as common
from benchlib import paths
from benchlib.cli.flags import add_config_flags, config_from
from benchlib.config import DataPrepConfig
from benchlib.config.choices import DATASETS_PREPARED, DEFAULT_PORT
from benchlib.errors import UsageError


def cmd_data(args) -> int:
    from benchlib.data import manifest, prepare

    cfg = config_from(args, DataPrepConfig, path=str(paths.from_command_line(args.path)))
    for name, entry in prepare.prepare(cfg).items():
        samples = ", ".join(f"{n} {split}" for split, n in entry["samples"].items())
        print(f"{name}: {entry['source']}, {samples}, {entry['bytes'] / 1e6:.1f} MB, "
              f"sha256 {entry['sha256'][:16]}")
    print(f"manifest: {Path(cfg.path) / manifest.MANIFEST}")
    if cfg.shards:
        from benchlib.shards import prepare as shards

        for e in shards.prepare(cfg):
            where = f"; uploaded to {e['url']} at {e['endpoint']}" if e["url"] else ""
            print(f"{e['dataset']} {e['format']}: {e['shards']} shards, {e['bytes'] / 1e6:.1f} MB "
                  f"in {e['folder']}{where}")
    return 0


def cmd_env(args) -> int:
    from benchlib.core import envinfo

    env = envinfo.collect()
    if args.json:
        print(json.dumps(env, indent=2, sort_keys=True, default=str))
    else:
        for name, value in envinfo.summary(env):
            print(f"{name:32} {value}")
    return 0


def cmd_sweep(args) -> int:
    from benchlib.runs import params, sweep

    rows = params.load_plan(args.file)  # every value is checked before anything runs
    outputs = common.outputs(args)
    if args.executor == "local":
        if args.partition or args.time or args.requeue or args.share_nodes:
            raise UsageError("executor: --partition, --time, --requeue and --share-nodes need "
                             "--executor slurm")
        params.preflight(rows)  # and what this machine must have (GPUs, data)
    if args.dry_run:
        if args.executor == "slurm":  # what slurm_sweep.run_plan refuses first, refused here
            from benchlib.runs import slurm_sweep

            slurm_sweep.check_submission(rows, args.partition, args.time)
        rows = _result_set(rows, outputs, args)
        todo = {r.run_id for r in sweep.pending(rows, outputs, args.force, args.label)}
        for r in rows:
            state = "run " if r.run_id in todo else "skip"
            print(f"{state} {r.table}/{r.run_id} {r.notebook.name} {json.dumps(r.overrides)}")
        return 0
    if args.executor == "slurm":
        from benchlib.runs import slurm_sweep

        summary = slurm_sweep.run_plan(rows, outputs, args.partition, args.time, args.force,
                                       progress=not args.no_progress, requeue=args.requeue,
                                       exclusive=not args.share_nodes, label=args.label)
    else:
        summary = sweep.run_plan(rows, outputs, force=args.force, progress=not args.no_progress,
                                 label=args.label)
    return common.report_sweep(summary, f"sweep {args.file}")


def _result_set(rows, outputs: Path, args):
    """The rows with the testbed and result set a sweep gives them (said on stderr)."""
    from benchlib.records import results, testbed

    bed = testbed.slurm(args.partition) if args.executor == "slurm" else None
    rows = results.assign_result_set(rows, outputs / "results", args.label, bed)
    if rows:
        print(f"result set {rows[0].label}, testbed {rows[0].testbed['name']} "
              f"({rows[0].testbed['id']})", file=sys.stderr)
    return rows


def cmd_slurm_task(args) -> int:
    """One array task of a Slurm sweep (what the array's script runs)."""
    from benchlib.runs import slurm_sweep

    return slurm_sweep.run_task(Path(args.plan).resolve(), args.index, common.outputs(args))


def cmd_slurm_script(args) -> int:
    """Print (or submit) an sbatch script for a multi-node training run."""
    import benchlib.cli.slurm_script as slurm_script

    return slurm_script.command(args)


def _parse_param(pair: list[str]) -> tuple[str, object]:
    name, value = pair
    try:
        return name, yaml.safe_load(value)
    except yaml.YAMLError:
        return name, value


def cmd_run(args) -> int:
    from benchlib.records import results
    from benchlib.runs import params, sweep

    names = [name for name, _ in args.param or []]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"param: {twice[0]} given more than once; give each parameter once")
    row = params.single_row(args.notebook, dict(map(_parse_param, args.param or [])), args.table)
    params.preflight([row])
    summary = sweep.run_plan([row], common.outputs(args), force=args.force, progress=False,
                             label=args.label)
    code = common.report_sweep(summary, f"run {row.table}/{row.run_id}")
    record = results.find_record(common.outputs(args) / "results", row.table, row.run_id, args.label)
    print(f"record: {results.record_path(common.outputs(args) / 'results', row.table, record['run_id'])}")
    return code


def cmd_report(args) -> int:
    from benchlib.report import publish

    outputs = common.outputs(args)
    index = publish.build(outputs, analysis=not args.no_analysis, zip_site=args.zip)
    print(f"report: {index}")
    if args.zip:
        archive = outputs / publish.ZIP_NAME
        print(f"zip: {archive} ({archive.stat().st_size / 1e6:.1f} MB; the folder: "
              f"{publish.size_bytes(index.parent) / 1e6:.1f} MB)")
    return 0


def cmd_compare(args) -> int:
    """Two result sets side by side; exit 1 when a row is slower beyond the threshold."""
    from benchlib.compare import changes, view

    comparison = changes.compare_sets(args.base, args.new, common.outputs(args) / "results",
                                      args.threshold, args.metric, args.study)
    print(view.text_report(comparison))
    return comparison.exit_code()



def add_parsers(sub) -> None:
    """The workbook's subcommands, on `sub` (argparse's subparsers)."""
    from benchlib.compare import changes  # light: its statistics import numpy and pandas when used

    p = sub.add_parser("data", help="download or generate the data sets (seed: dataset_download.py)")
    add_config_flags(p, DataPrepConfig, required=("path",),
                     choices={"dataset": ["all", *DATASETS_PREPARED]})
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("env", help="the environment every record stores")
    p.add_argument("--json", action="store_true", help="everything, as JSON")
    p.set_defaults(func=cmd_env)

    _add_sweep_parsers(sub)

    p = sub.add_parser("run", help="run one notebook with parameters and store its record")
    p.add_argument("notebook", help="e.g. 00_data_prep or notebooks/00_data_prep.ipynb")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="a parameter (VALUE read as YAML: 3, 0.5, true, text)")
    p.add_argument("--table", "--study", dest="table",
                   help="the table the record is filed under: outputs/results/<table>/ "
                        "(default: the notebook's name; --study is its older spelling)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.add_argument("--force", action="store_true", help="rerun even if an ok record exists")
    p.add_argument("--label", help=common.LABEL_HELP)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", help="two result sets side by side: before, after, ratio with "
                       "a 95%% interval, verdict, what changed; exit 1 when a row got slower")
    p.add_argument("base", help="a result set's label, or a folder (outputs/ or results/: its "
                   "newest set)")
    p.add_argument("new", help="the same, for the set to judge")
    p.add_argument("--threshold", default=f"{changes.DEFAULT_THRESHOLD:.0%}",
                   help="smallest change that counts, as 5%% or 0.05 (default "
                   f"{changes.DEFAULT_THRESHOLD:.0%}%: README)")
    p.add_argument("--metric", action="append",
                   help="compare this metric (repeatable; 'all': every one with a direction); "
                   "default: each row's main one (samples_per_s, busbw_gbps, ...)")
    p.add_argument("--study", action="append", help="only this study (repeatable)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="run the analysis and publish outputs/report/index.html")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.add_argument("--no-analysis", action="store_true", help="only convert runs and the index")
    p.add_argument("--zip", action="store_true",
                   help="also write the report as one archive, outputs/benchlib-report.zip "
                   "(not when the analysis fails)")
    p.set_defaults(func=cmd_report)


def _add_sweep_parsers(sub) -> None:
    """sweep, and the two Slurm commands: slurm-task (a sweep's array task) and
    slurm-script (an sbatch script for one multi-node run)."""
    p = sub.add_parser("sweep", help="run a notebook once per row of a parameter file")
    p.add_argument("file", help="params/<study>.yaml")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.add_argument("--force", action="store_true", help="rerun rows that already have an ok record")
    p.add_argument("--dry-run", action="store_true", help="check the file, list rows, run nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--executor", choices=["local", "slurm"], default="local",
                   help="local: one row after another here; slurm: a job array per "
                        "allocation shape, a task per row")
    p.add_argument("--partition", help="slurm: sbatch --partition")
    p.add_argument("--time", help="slurm: sbatch --time for each row (e.g. 00:30:00)")
    p.add_argument("--requeue", action="store_true", help="slurm: sbatch --requeue")
    p.add_argument("--share-nodes", action="store_true",
                   help="slurm: leave out --exclusive (rows may then share nodes and measure each other)")
    p.add_argument("--label", help=common.LABEL_HELP)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("slurm-task", help="run one row of a Slurm sweep (the array's tasks call it)")
    p.add_argument("plan", help="outputs/slurm/<sweep>/plan.json")
    p.add_argument("index", type=int, help="the array task id: the row's index in the plan")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_slurm_task)

    p = sub.add_parser("slurm-script", help="an sbatch script for a multi-node run (seed: "
                       "srun_ddp.sh, srun_lightning.sh)")
    p.add_argument("trainer", choices=["ddp", "elastic", "lightning"],
                   help="ddp, elastic: srun torchrun, one agent per node; lightning: srun, a "
                   "task per device")
    p.add_argument("--max-restarts", type=int, default=0,
                   help="torchrun restarts the ranks this often after a failure (elastic)")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--devices", type=int, required=True, help="GPUs (or CPU processes) per node")
    p.add_argument("--gpu", action="store_true", help="ask for --gpus-per-node=DEVICES")
    p.add_argument("--partition")
    p.add_argument("--time")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="rendezvous port on the first node")
    p.add_argument("--output", help="sbatch --output (default: OUTPUTS/slurm/%%x-%%j.log, "
                   "the job's name and id)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP + "; a submitted script is kept in its "
                   "slurm/ under a name of its own")
    p.add_argument("--requeue", action="store_true", help="requeue after preemption")
    p.add_argument("--share-nodes", action="store_true", help="leave out --exclusive")
    p.add_argument("--ntasks-per-node", type=int,
                   help="checked, not needed: what your old script used (Lightning: = devices)")
    p.add_argument("--world-size", type=int, help="checked, not needed: must be nodes x devices")
    p.add_argument("--no-capacity-check", action="store_true",
                   help="do not ask sinfo whether the partition's nodes have the devices")
    p.add_argument("--submit", action="store_true", help="sbatch it and print the job id")
    p.add_argument("--worker-args", default="",
                   help="the worker's arguments as one string: \"--path data --model resnet50\" "
                   "(one flag alone: --worker-args=--dummy)")
    p.set_defaults(func=cmd_slurm_script)
