"""The measuring commands: io, maxbatch, allreduce, doctor, calibrate, overhead (each
command's flags beside what it does)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import benchlib.cli.common as common
from benchlib import paths
from benchlib.cli.flags import add_config_flags, config_from
from benchlib.config import MemoryAndBatchConfig, SingleDeviceIoConfig
from benchlib.config.choices import DEVICES
from benchlib.core import health
from benchlib.errors import BenchlibError, ConfigError, UsageError


def _new_run(args, notebook: str, params: dict) -> tuple[str, dict]:
    """The id a measurement run from the shell records under (never an ok record's, so
    its logs and record add to the history), and its testbed and result set."""
    from benchlib.records import results, testbed

    results_dir = common.outputs(args) / "results"
    bed = testbed.current()
    label = testbed.check_label(args.label) if args.label else \
        testbed.default_label(results.read_records(results_dir), bed)
    run_id = results.run_id_for(args.table, notebook, params, bed["id"])
    return results.free_run_id(results_dir, args.table, run_id, label), \
        {"label": label, "testbed": bed}


def _store(args, notebook: str, run_id: str, params: dict, started: tuple[str, dict],
           metrics: dict, details: dict, result_set: dict) -> Path:
    """A record for a measurement run from the shell: the same schema as a notebook run's.
    `started`: when, and the host's load then (results.now(), hostload.sample())."""
    from benchlib.core import envinfo, hostload
    from benchlib.records import results

    record = results.make_record(
        run_id=run_id, table=args.table, notebook=notebook, params=params,
        env=envinfo.collect(), started_at=started[0], status="ok", metrics=metrics,
        details=details, host_load=hostload.span(started[1], hostload.sample()), **result_set)
    return results.write_record(common.outputs(args) / "results", record)


def cmd_io(args) -> int:
    """Seed 000's singlegpu.py / test_funcs.py: one setting measured, one record written."""
    from benchlib.core import hostload
    from benchlib.records import results
    from benchlib.studies import single_device_io

    cfg = config_from(args, SingleDeviceIoConfig, path=str(paths.from_command_line(args.path)))
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


def cmd_maxbatch(args) -> int:
    """The largest batch that trains: a table of the batches tried, the sentence, a record."""
    from benchlib.core import hostload
    from benchlib.records import results
    from benchlib.studies import memory_and_batch

    try:  # named as typed: --memory-limit, not memory_limit
        cfg = config_from(args, MemoryAndBatchConfig)
        memory_and_batch.preflight(cfg)  # bad input ends here: exit 2, nothing written
    except ConfigError as e:
        raise UsageError(f"--{e.field.replace('_', '-')}: {str(e).split(': ', 1)[1]}") from None
    params = cfg.as_dict()
    run_id, result_set = _new_run(args, "benchlib-maxbatch", params)
    started = results.now(), hostload.sample()
    result = memory_and_batch.run(cfg, run_id)
    print(f"{'batch':>7}  {'fits':>4}  {'samples/s':>10}  {'peak':>10}  why not")
    for t in result.details["trials"]:
        rate = f"{t['samples_per_s']:10.1f}" if t["samples_per_s"] else f"{'-':>10}"
        print(f"{t['batch_size']:>7}  {'yes' if t['fits'] else 'no':>4}  {rate}  "
              f"{memory_and_batch.size_text(t['peak_bytes']):>10}  {t['why']}")
    print(memory_and_batch.describe(cfg, result))
    path = _store(args, "benchlib maxbatch (CLI)", run_id, params, started, result.metrics,
                  result.details, result_set)
    print(f"record: {path}")
    return 0


def _check_distributed(args) -> None:
    """Device, backend, rank and node counts, before anything starts. --nnodes left out is
    the Slurm job's node count under `--launcher srun`, one node otherwise."""
    from benchlib.distributed.device import choose_backend, uses_cuda
    from benchlib.distributed.env import job_nodes
    choose_backend("cuda" if uses_cuda(args.device) else "cpu", args.backend)
    if args.nproc < 1:
        raise UsageError(f"nproc: must be >= 1, got {args.nproc}")
    if args.nnodes is None:
        args.nnodes = job_nodes() if args.launcher == "srun" else 1
    if args.nnodes < 1:
        raise UsageError(f"nnodes: must be >= 1, got {args.nnodes}")


def cmd_allreduce(args) -> int:
    """All-reduce bus bandwidth over message sizes, launched like the trainers."""
    from benchlib.core import hostload
    from benchlib.launch.launcher import launch
    from benchlib.records import results

    _check_distributed(args)
    if args.nproc * args.nnodes < 2:  # one rank per node on two nodes is enough
        raise UsageError(f"nproc: all-reduce needs at least 2 ranks, got {args.nproc}")
    if args.max_bytes < 1024:
        raise UsageError(f"max_bytes: must be >= 1024, got {args.max_bytes}")
    if args.iters < 1:
        raise UsageError(f"iters: must be >= 1, got {args.iters}")
    params = {"nproc_per_node": args.nproc, "nnodes": args.nnodes, "launcher": args.launcher,
              "backend": args.backend, "device": args.device,
              "allreduce_max_bytes": args.max_bytes}
    run_id, result_set = _new_run(args, "benchlib-allreduce", params)
    started = results.now(), hostload.sample()
    out = launch("allreduce", ["--max-bytes", str(args.max_bytes), "--device", args.device,
                               "--backend", args.backend, "--iters", str(args.iters)],
                 common.outputs(args) / "logs" / run_id, args.launcher, args.nproc,
                 port=args.port, timeout_s=args.timeout, nnodes=args.nnodes)
    m = out.result["metrics"]
    print(f"{'bytes':>12}  {'time':>10}  {'algbw GB/s':>10}  {'busbw GB/s':>10}")
    for row in out.result["details"]["sizes"]:
        print(f"{row['bytes']:>12}  {row['time_s'] * 1e6:8.1f}us  {row['algbw_gbps']:10.3f}  "
              f"{row['busbw_gbps']:10.3f}")
    print(f"peak busbw {m['busbw_gbps']:.3f} GB/s at {m['busbw_at_bytes']} B, "
          f"{args.nproc * args.nnodes} ranks, {m['backend_used']}")
    path = _store(args, "benchlib allreduce (CLI)", run_id, params, started, m,
                  {"allreduce": out.result["details"]["sizes"]}, result_set)
    print(f"record: {path}")
    return 0


def cmd_doctor(args) -> int:
    """Seed 004's toy test: through torchrun here, or this process as one rank of tcp://;
    with --health also every device's matmul and every node pair's all-reduce, a record."""
    from benchlib.cli.doctor_mode import doctor_mode
    from benchlib.launch.launcher import launch
    doctor_mode(args)
    _check_distributed(args)
    health.check_flags(args)
    ranks = args.nproc * args.nnodes
    if args.slow_rank is not None and not 0 <= args.slow_rank < ranks:
        raise UsageError(f"slow_rank: {args.slow_rank} is not a rank of this launch "
                         f"(ranks 0-{ranks - 1})")
    argv = ["--device", args.device, "--backend", args.backend, "--timeout", str(args.timeout),
            *_health_argv(args)]
    if args.init_method:
        from benchlib.workers import doctor

        return doctor.entry(doctor.check, doctor.parser(), [
            "--init-method", args.init_method, "--rank", str(args.rank),
            "--world-size", str(args.world_size), *argv], check=health.check_flags)
    if not args.health:
        out = launch("doctor", argv, common.outputs(args) / "logs" / "doctor", args.launcher,
                     args.nproc, port=args.port, timeout_s=args.timeout, nnodes=args.nnodes)
        print(out.result["details"]["line"])
        return 0
    return _doctor_health(args, argv)


def _health_argv(args) -> list[str]:
    if not args.health:
        return []
    argv = ["--health", "--matmul-dtype", args.matmul_dtype, "--slow-factor", str(args.slow_factor)]
    for name in ("matmul_size", "matmul_repeats", "slow_rank"):
        if getattr(args, name) is not None:
            argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return argv


def _doctor_health(args, argv: list[str]) -> int:
    """`doctor --health` launched here: the lines, and a record whose testbed carries the
    figures (compare names a device or node pair that got slower from them)."""
    from benchlib.core import hostload
    from benchlib.launch.launcher import launch
    from benchlib.records import results

    params = {"nproc_per_node": args.nproc, "nnodes": args.nnodes, "launcher": args.launcher,
              "backend": args.backend, "device": args.device, "matmul_size": args.matmul_size,
              "matmul_repeats": args.matmul_repeats, "matmul_dtype": args.matmul_dtype,
              "slow_rank": args.slow_rank, "slow_factor": args.slow_factor}
    run_id, result_set = _new_run(args, "benchlib-doctor", params)
    started = results.now(), hostload.sample()
    out = launch("doctor", argv, common.outputs(args) / "logs" / run_id, args.launcher,
                 args.nproc, port=args.port, timeout_s=args.timeout, nnodes=args.nnodes)
    figures = out.result["details"]["health"]
    print(out.result["details"]["line"])
    print("\n".join(figures["lines"]))
    result_set["testbed"] = {**result_set["testbed"], "health": {
        k: figures[k] for k in ("devices", "pairs", "one_host", "outliers", "matmul")}}
    path = _store(args, "benchlib doctor (CLI)", run_id, params, started,
                  out.result["metrics"], {"health": figures}, result_set)
    print(f"record: {path}")
    return 0


def cmd_calibrate(args) -> int:
    from benchlib.distributed.device import device_for
    from benchlib.studies import calibrate

    for name in ("steps", "rounds", "batch_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"{name}: must be >= 1, got {getattr(args, name)}")
    if args.ground_truth:
        return _ground_truth(args)
    if args.path:  # before minutes of measuring, not after
        from benchlib.data.manifest import describe

        args.path = str(paths.from_command_line(args.path))
        describe(args.path, "fashion-mnist")
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
    from benchlib.studies import calibrate

    device = device_for(args.device)  # gpu without CUDA: refused here, before any launch
    ranks = (1, 2) if device.type == "cpu" or torch.cuda.device_count() >= 2 else (1,)
    if ranks == (1,):
        print("ground truth: one GPU here, so 1 rank only")
    checks = calibrate.ground_truth(device.type if device.type == "cpu" else "gpu",
                                    common.outputs(args) / "logs" / "calibrate-ground-truth",
                                    ranks, args.delay_ms, args.steps)
    print("\n".join(calibrate.ground_truth_lines(checks)))
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
    """The measuring subcommands, on `sub` (argparse's subparsers)."""
    p = sub.add_parser("io", help="single-device IO: seed 000's singlegpu.py and test_funcs.py")
    add_config_flags(p, SingleDeviceIoConfig, positional=("epochs", "device"),
                     required=("path", "dataset"), choices={"device": DEVICES})
    p.add_argument("--table", "--study", dest="table", default="io",
                   help="the table the record is filed under: outputs/results/<table>/ "
                        "(default io; --study is its older spelling)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.add_argument("--label", help=common.MEASURE_LABEL_HELP)
    p.set_defaults(func=cmd_io)

    p = sub.add_parser("maxbatch", help="the largest per-device batch that trains (doubling, "
                       "then bisection, on real training steps), throughput against batch")
    add_config_flags(p, MemoryAndBatchConfig, choices={"device": DEVICES})
    p.add_argument("--table", default="maxbatch",
                   help="the table the record is filed under: outputs/results/<table>/ "
                        "(default maxbatch)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.add_argument("--label", help=common.MEASURE_LABEL_HELP)
    p.set_defaults(func=cmd_maxbatch)

    def distributed(p, nproc_default: int = 2) -> None:
        p.add_argument("--nproc", type=int, default=nproc_default, help="ranks per node")
        p.add_argument("--launcher", default="torchrun",
                       choices=["torchrun", "mp_spawn", "tcp", "srun"],
                       help="srun: inside a Slurm job (sbatch, salloc), `srun torchrun` on "
                            "each of its nodes")
        p.add_argument("--nnodes", type=int,
                       help="nodes: under srun the job's nodes (default all of them); with "
                            "torchrun that many agents on this host (default 1)")
        p.add_argument("--device", default="auto", choices=DEVICES)
        p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
        p.add_argument("--port", type=int, help="rendezvous port (default: a free one)")
        p.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole run")
        p.add_argument("--outputs", help=common.OUTPUTS_HELP)

    p = sub.add_parser("allreduce", help="all-reduce bus bandwidth (busbw = algbw x 2(n-1)/n)")
    distributed(p)
    p.add_argument("--max-bytes", type=int, default=64 * 2**20)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--table", "--study", dest="table", default="allreduce",
                   help="the table the record is filed under (default allreduce; --study is "
                        "its older spelling)")
    p.add_argument("--label", help=common.MEASURE_LABEL_HELP)
    p.set_defaults(func=cmd_allreduce)

    p = sub.add_parser("doctor", help="seed 004's toy test: init, a checked all_reduce, latency")
    distributed(p)
    p.add_argument("--init-method", help="tcp://HOST:PORT: run this process as one rank")
    p.add_argument("--rank", type=int, help="with --init-method: this process's rank (default 0)")
    p.add_argument("--world-size", type=int,
                   help="with --init-method: ranks in all (default 2)")
    health.add_flags(p)
    p.add_argument("--table", default="doctor_health",
                   help="with --health: the table the record is filed under (default "
                        "doctor_health)")
    p.add_argument("--label", help=common.MEASURE_LABEL_HELP)
    p.set_defaults(nproc=None, launcher=None)  # filled in by doctor_mode
    p.set_defaults(func=cmd_doctor)

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
                   "injected into every step, its samples/s and the parent's clock against "
                   "the truth; --steps per epoch; exit 1 when one misses 2%%")
    p.add_argument("--delay-ms", type=float, default=100.0,
                   help="--ground-truth: the delay injected into every step (default 100)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("overhead", help="benchmark: the sweep's fixed cost per row")
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--compare-cli", action="store_true", help="also time the papermill CLI")
    p.set_defaults(func=cmd_overhead)
