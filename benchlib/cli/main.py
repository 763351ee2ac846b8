"""`python -m benchlib ...`: data, env, sweep, run, report, compare, io, allreduce, doctor,
calibrate, overhead.

Bad input prints one line naming the parameter and what is allowed, and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

from benchlib import paths
from benchlib.cli.flags import add_config_flags, config_from
from benchlib.config import DataPrepConfig, SingleDeviceIoConfig
from benchlib.config.choices import DATASETS_PREPARED, DEFAULT_PORT, DEVICES
from benchlib.errors import BenchlibError, UsageError


def _outputs(args) -> Path:
    if args.outputs:  # notebooks' `outputs/...` parameters follow it (paths.resolve)
        os.environ["BENCHLIB_OUTPUTS"] = str(Path(args.outputs).resolve())
    return paths.checked_outputs(paths.outputs_dir())


def cmd_data(args) -> int:
    from benchlib.data import manifest, prepare

    # resolved as the rows resolve their `path`: `outputs/...` under $BENCHLIB_OUTPUTS
    cfg = config_from(args, DataPrepConfig, path=str(paths.resolve(args.path)))
    for name, entry in prepare.prepare(cfg).items():
        samples = ", ".join(f"{n} {split}" for split, n in entry["samples"].items())
        print(f"{name}: {entry['source']}, {samples}, {entry['bytes'] / 1e6:.1f} MB, "
              f"sha256 {entry['sha256'][:16]}")
    print(f"manifest: {Path(cfg.path) / manifest.MANIFEST}")
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


def _report_sweep(summary, title: str) -> int:
    for f in summary.failures:
        err = f["error"]
        print(f"FAILED {f['source']} (run {f['run_id']}): {err['type']}: {err['message']}\n"
              f"       notebook: {f['executed_notebook']}", file=sys.stderr)
        if f.get("slurm_log"):
            print(f"       Slurm log: {f['slurm_log']}", file=sys.stderr)
    print(f"{title}: {summary.line()}")
    return 1 if summary.failed else 0


def cmd_sweep(args) -> int:
    from benchlib.workbook import params, sweep

    rows = params.load_plan(args.file)  # every value is checked before anything runs
    outputs = _outputs(args)
    if args.executor == "local":
        params.preflight(rows)  # and what this machine must have (GPUs, data)
    if args.dry_run:
        rows = _result_set(rows, outputs, args)
        todo = {r.run_id for r in sweep.pending(rows, outputs, args.force, args.label)}
        for r in rows:
            state = "run " if r.run_id in todo else "skip"
            print(f"{state} {r.study}/{r.run_id} {r.notebook.name} {json.dumps(r.overrides)}")
        return 0
    if args.executor == "slurm":
        from benchlib.workbook import slurm_sweep

        summary = slurm_sweep.run_plan(rows, outputs, args.partition, args.time, args.force,
                                       progress=not args.no_progress, requeue=args.requeue,
                                       exclusive=not args.share_nodes, label=args.label)
    else:
        if args.partition or args.time or args.requeue or args.share_nodes:
            raise UsageError("executor: --partition, --time, --requeue and --share-nodes need "
                             "--executor slurm")
        summary = sweep.run_plan(rows, outputs, force=args.force, progress=not args.no_progress,
                                 label=args.label)
    return _report_sweep(summary, f"sweep {args.file}")


def _result_set(rows, outputs: Path, args):
    """The rows with the testbed and result set a sweep gives them (said on stderr)."""
    from benchlib.workbook import results, testbed

    bed = testbed.slurm(args.partition) if args.executor == "slurm" else None
    rows = results.assign_result_set(rows, outputs / "results", args.label, bed)
    if rows:
        print(f"result set {rows[0].label}, testbed {rows[0].testbed['name']} "
              f"({rows[0].testbed['id']})", file=sys.stderr)
    return rows


def cmd_slurm_task(args) -> int:
    """One array task of a Slurm sweep (what the array's script runs)."""
    from benchlib.workbook import slurm_sweep

    return slurm_sweep.run_task(Path(args.plan).resolve(), args.index, _outputs(args))


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
    from benchlib.workbook import params, results, sweep

    names = [name for name, _ in args.param or []]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"param: {twice[0]} given more than once; give each parameter once")
    row = params.single_row(args.notebook, dict(map(_parse_param, args.param or [])), args.study)
    params.preflight([row])
    summary = sweep.run_plan([row], _outputs(args), force=args.force, progress=False,
                             label=args.label)
    code = _report_sweep(summary, f"run {row.study}/{row.run_id}")
    record = results.find_record(_outputs(args) / "results", row.study, row.run_id, args.label)
    print(f"record: {results.record_path(_outputs(args) / 'results', row.study, record['run_id'])}")
    return code


def cmd_report(args) -> int:
    from benchlib.workbook import report

    outputs = _outputs(args)
    index = report.build(outputs, analysis=not args.no_analysis, zip_site=args.zip)
    print(f"report: {index}")
    if args.zip:
        archive = outputs / report.ZIP_NAME
        print(f"zip: {archive} ({archive.stat().st_size / 1e6:.1f} MB; the folder: "
              f"{report.size_bytes(index.parent) / 1e6:.1f} MB)")
    return 0


def _new_run(args, notebook: str, params: dict) -> tuple[str, dict]:
    """The id a measurement run from the shell records under (never an ok record's, so
    its logs and record add to the history), and its testbed and result set."""
    from benchlib.workbook import testbed
    from benchlib.workbook import results

    results_dir = _outputs(args) / "results"
    bed = testbed.current()
    label = testbed.check_label(args.label) if args.label else \
        testbed.default_label(results.read_records(results_dir), bed)
    run_id = results.run_id_for(args.study, notebook, params, bed["id"])
    return results.free_run_id(results_dir, args.study, run_id, label), \
        {"label": label, "testbed": bed}


def _store(args, notebook: str, run_id: str, params: dict, started: tuple[str, dict],
           metrics: dict, details: dict, result_set: dict) -> Path:
    """A record for a measurement run from the shell: the same schema as a notebook run's.
    `started`: when, and the host's load then (results.now(), hostload.sample())."""
    from benchlib.core import envinfo, hostload
    from benchlib.workbook import results

    record = results.make_record(
        run_id=run_id, study=args.study, notebook=notebook, params=params,
        env=envinfo.collect(), started_at=started[0], status="ok", metrics=metrics,
        details=details, host_load=hostload.span(started[1], hostload.sample()), **result_set)
    return results.write_record(_outputs(args) / "results", record)


def cmd_io(args) -> int:
    """Seed 000's singlegpu.py / test_funcs.py: one setting measured, one record written."""
    from benchlib.core import hostload
    from benchlib.studies import single_device_io
    from benchlib.workbook import results

    cfg = config_from(args, SingleDeviceIoConfig, path=str(Path(args.path).resolve()))
    single_device_io.preflight(cfg)  # bad input ends here: exit 2, nothing written
    params = cfg.as_dict()
    run_id, result_set = _new_run(args, "benchlib-io", params)
    started = results.now(), hostload.sample()
    result = single_device_io.run(cfg, run_id)
    path = _store(args, "benchlib io (CLI)", run_id, params, started, result.metrics,
                  result.details(), result_set)
    print(single_device_io.describe(cfg, result))
    for row in result.profile:
        print(f"  {row['op'][:48]:48} calls {row['calls']:6d}  self cpu {row['self_cpu_ms']:9.3f} ms"
              + (f"  self cuda {row['self_cuda_ms']:9.3f} ms" if "self_cuda_ms" in row else ""))
    if result.metrics["trace_path"]:
        print(f"trace: {result.metrics['trace_path']}")
    print(f"record: {path}")
    return 0


def _check_distributed(args) -> None:
    """Device, backend and rank count, before anything starts."""
    import torch

    from benchlib.distributed.device import check_device, choose_backend
    check_device(args.device)
    cuda = args.device == "gpu" or (args.device == "auto" and torch.cuda.is_available())
    choose_backend("cuda" if cuda else "cpu", args.backend)
    if args.nproc < 1:
        raise UsageError(f"nproc: must be >= 1, got {args.nproc}")


def cmd_allreduce(args) -> int:
    """All-reduce bus bandwidth over message sizes, launched like the trainers."""
    from benchlib.core import hostload
    from benchlib.launch.launcher import launch
    from benchlib.workbook import results

    _check_distributed(args)
    if args.nproc < 2:
        raise UsageError(f"nproc: all-reduce needs at least 2 ranks, got {args.nproc}")
    if args.max_bytes < 1024:
        raise UsageError(f"max_bytes: must be >= 1024, got {args.max_bytes}")
    if args.iters < 1:
        raise UsageError(f"iters: must be >= 1, got {args.iters}")
    params = {"nproc_per_node": args.nproc, "launcher": args.launcher, "backend": args.backend,
              "device": args.device, "allreduce_max_bytes": args.max_bytes}
    run_id, result_set = _new_run(args, "benchlib-allreduce", params)
    started = results.now(), hostload.sample()
    out = launch("allreduce", ["--max-bytes", str(args.max_bytes), "--device", args.device,
                               "--backend", args.backend, "--iters", str(args.iters)],
                 _outputs(args) / "logs" / run_id, args.launcher, args.nproc,
                 port=args.port, timeout_s=args.timeout)
    m = out.result["metrics"]
    print(f"{'bytes':>12}  {'time':>10}  {'algbw GB/s':>10}  {'busbw GB/s':>10}")
    for row in out.result["details"]["sizes"]:
        print(f"{row['bytes']:>12}  {row['time_s'] * 1e6:8.1f}us  {row['algbw_gbps']:10.3f}  "
              f"{row['busbw_gbps']:10.3f}")
    print(f"peak busbw {m['busbw_gbps']:.3f} GB/s at {m['busbw_at_bytes']} B, {args.nproc} ranks, "
          f"{m['backend_used']}")
    path = _store(args, "benchlib allreduce (CLI)", run_id, params, started, m,
                  {"allreduce": out.result["details"]["sizes"]}, result_set)
    print(f"record: {path}")
    return 0


def cmd_compare(args) -> int:
    """Two result sets side by side; exit 1 when a row is slower beyond the threshold."""
    from benchlib.workbook import compare, compare_view

    comparison = compare.compare_sets(args.base, args.new, _outputs(args) / "results",
                                      args.threshold, args.metric, args.study)
    print(compare_view.text_report(comparison))
    return comparison.exit_code()


def cmd_doctor(args) -> int:
    """Seed 004's toy test: through torchrun here, or this process as one rank of tcp://."""
    from benchlib.cli.doctor_mode import doctor_mode
    from benchlib.launch.launcher import launch

    doctor_mode(args)
    _check_distributed(args)
    if args.init_method:
        from benchlib.workers import doctor

        return doctor.entry(doctor.check, doctor.parser(), [
            "--init-method", args.init_method, "--rank", str(args.rank),
            "--world-size", str(args.world_size), "--device", args.device,
            "--backend", args.backend, "--timeout", str(args.timeout)])
    out = launch("doctor", ["--device", args.device, "--backend", args.backend,
                            "--timeout", str(args.timeout)],
                 _outputs(args) / "logs" / "doctor", args.launcher, args.nproc,
                 port=args.port, timeout_s=args.timeout)
    print(out.result["details"]["line"])
    return 0


def cmd_calibrate(args) -> int:
    from benchlib.distributed.device import device_for
    from benchlib.studies import calibrate

    for name in ("steps", "rounds", "batch_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"{name}: must be >= 1, got {getattr(args, name)}")
    if args.path:  # before minutes of measuring, not after
        from benchlib.data.manifest import describe

        describe(args.path, "fashion-mnist")
    device = device_for(args.device)
    shape = dict(model_name=args.model, batch_size=args.batch_size, steps=args.steps)
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


def cmd_overhead(args) -> int:
    """The sweep's fixed cost per row: a trivial notebook, `--rows` times."""
    import statistics
    import subprocess
    import tempfile

    from benchlib.workbook import sweep
    from benchlib.workbook.params import single_row

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


def build_parser() -> argparse.ArgumentParser:
    from benchlib.workbook import compare  # light: its statistics import numpy and pandas when used

    parser = argparse.ArgumentParser(
        prog="benchlib", description="Measure PyTorch training performance; run the workbook.")
    parser.add_argument("--allocator", choices=["default", "tuned", "jemalloc", "tcmalloc"],
                        help="restart under this memory allocator (see benchlib/core/allocator.py); "
                        "sweeps pass it on to every kernel")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("data", help="download or generate the data sets (seed: dataset_download.py)")
    add_config_flags(p, DataPrepConfig, required=("path",),
                     choices={"dataset": ["all", *DATASETS_PREPARED]})
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("env", help="the environment every record stores")
    p.add_argument("--json", action="store_true", help="everything, as JSON")
    p.set_defaults(func=cmd_env)

    outputs_help = "outputs folder (default: $BENCHLIB_OUTPUTS or outputs/)"
    label_help = ("result set the records join (default: this testbed's, named after it and "
                  "the day it was first used); rows it already has are skipped")
    p = sub.add_parser("sweep", help="run a notebook once per row of a parameter file")
    p.add_argument("file", help="params/<study>.yaml")
    p.add_argument("--outputs", help=outputs_help)
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
    p.add_argument("--label", help=label_help)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("slurm-task", help="run one row of a Slurm sweep (the array's tasks call it)")
    p.add_argument("plan", help="outputs/slurm/<sweep>/plan.json")
    p.add_argument("index", type=int, help="the array task id: the row's index in the plan")
    p.add_argument("--outputs", help=outputs_help)
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
    p.add_argument("--outputs", help=outputs_help + "; a submitted script is kept in its "
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

    p = sub.add_parser("run", help="run one notebook with parameters and store its record")
    p.add_argument("notebook", help="e.g. 00_data_prep or notebooks/00_data_prep.ipynb")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="a parameter (VALUE read as YAML: 3, 0.5, true, text)")
    p.add_argument("--study", help="study name for the record (default: the notebook's name)")
    p.add_argument("--outputs", help=outputs_help)
    p.add_argument("--force", action="store_true", help="rerun even if an ok record exists")
    p.add_argument("--label", help=label_help)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", help="two result sets side by side: before, after, ratio with "
                       "a 95%% interval, verdict, what changed; exit 1 when a row got slower")
    p.add_argument("base", help="a result set's label, or a folder (outputs/ or results/: its "
                   "newest set)")
    p.add_argument("new", help="the same, for the set to judge")
    p.add_argument("--threshold", default=f"{compare.DEFAULT_THRESHOLD:.0%}",
                   help="smallest change that counts, as 5%% or 0.05 (default "
                   f"{compare.DEFAULT_THRESHOLD:.0%}%: README)")
    p.add_argument("--metric", action="append",
                   help="compare this metric (repeatable; 'all': every one with a direction); "
                   "default: each row's main one (samples_per_s, busbw_gbps, ...)")
    p.add_argument("--study", action="append", help="only this study (repeatable)")
    p.add_argument("--outputs", help=outputs_help)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="run the analysis and publish outputs/report/index.html")
    p.add_argument("--outputs", help=outputs_help)
    p.add_argument("--no-analysis", action="store_true", help="only convert runs and the index")
    p.add_argument("--zip", action="store_true",
                   help="also write the report as one archive, outputs/benchlib-report.zip")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("io", help="single-device IO: seed 000's singlegpu.py and test_funcs.py")
    add_config_flags(p, SingleDeviceIoConfig, positional=("epochs", "device"),
                     required=("path", "dataset"), choices={"device": DEVICES})
    p.add_argument("--study", default="io", help="study name of the record (default io)")
    p.add_argument("--outputs", help=outputs_help)
    p.add_argument("--label", help=label_help)
    p.set_defaults(func=cmd_io)

    def distributed(p, nproc_default: int = 2) -> None:
        p.add_argument("--nproc", type=int, default=nproc_default, help="ranks on this host")
        p.add_argument("--launcher", default="torchrun", choices=["torchrun", "mp_spawn", "tcp"])
        p.add_argument("--device", default="auto", choices=DEVICES)
        p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
        p.add_argument("--port", type=int, help="rendezvous port (default: a free one)")
        p.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole run")
        p.add_argument("--outputs", help=outputs_help)

    p = sub.add_parser("allreduce", help="all-reduce bus bandwidth (busbw = algbw x 2(n-1)/n)")
    distributed(p)
    p.add_argument("--max-bytes", type=int, default=64 * 2**20)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--study", default="allreduce")
    p.add_argument("--label", help=label_help)
    p.set_defaults(func=cmd_allreduce)

    p = sub.add_parser("doctor", help="seed 004's toy test: init, a checked all_reduce, latency")
    distributed(p)
    p.add_argument("--init-method", help="tcp://HOST:PORT: run this process as one rank")
    p.add_argument("--rank", type=int, help="with --init-method: this process's rank (default 0)")
    p.add_argument("--world-size", type=int,
                   help="with --init-method: ranks in all (default 2)")
    p.set_defaults(nproc=None, launcher=None)  # filled in by doctor_mode
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("calibrate", help="benchmark: benchlib's loop vs a bare loop; fetch ceiling")
    p.add_argument("--device", default="cpu", choices=DEVICES)
    p.add_argument("--steps", type=int, default=50, help="steps per block")
    p.add_argument("--rounds", type=int, default=80, help="interleaved rounds")
    p.add_argument("--model", default="toynet", choices=["toynet", "resnet18", "resnet50"],
                   help="toynet: launch-bound; resnet18/50: compute-bound (224 px)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--path", help="data folder: also compare preload_batched with a plain copy")
    p.add_argument("--json", help="also write every figure here (JSON)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("overhead", help="benchmark: the sweep's fixed cost per row")
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--compare-cli", action="store_true", help="also time the papermill CLI")
    p.set_defaults(func=cmd_overhead)

    # listed here for --help; main() hands its arguments to benchlib.cli.project
    sub.add_parser("project", help="scaling projection to more devices and nodes, and its "
                   "check against seed 003 (project --help)")
    return parser


def _restart_with_allocator(name: str, argv: list[str]) -> None:
    """Allocator settings are read at process start: start this command again with them."""
    from benchlib.core import allocator

    if os.environ.get("BENCHLIB_ALLOCATOR") == name:
        return  # already restarted
    env = {**os.environ, **allocator.environment_for(name), "BENCHLIB_ALLOCATOR": name}
    os.execve(sys.executable, [sys.executable, "-m", "benchlib", *argv], env)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["project"]:  # its own parser takes every option
        import benchlib.cli.project as projection_cli

        return projection_cli.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.allocator:
            _restart_with_allocator(args.allocator, argv)
        return args.func(args)
    except BenchlibError as e:
        print(f"benchlib {args.command}: {e}", file=sys.stderr)
        return e.status()
    except KeyboardInterrupt:
        print(f"benchlib {args.command}: interrupted", file=sys.stderr)
        return 130
