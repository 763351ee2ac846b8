"""The commands that start ranks: `benchlib allreduce` (bus bandwidth over message sizes)
and `benchlib doctor` (seed 004's toy test; with --health each device's matmul and each
node pair's all-reduce), launched as the trainers are; a record each, written as the
records layer writes a command's (records/command_run.py)."""

from __future__ import annotations

import benchlib.cli.common as common
from benchlib.config.choices import DEVICES
from benchlib.core import health
from benchlib.errors import UsageError


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
    from benchlib.launch.launcher import launch

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
    run = common.start_record(args, "allreduce", params)
    out = launch("allreduce", ["--max-bytes", str(args.max_bytes), "--device", args.device,
                               "--backend", args.backend, "--iters", str(args.iters)],
                 common.outputs(args) / "logs" / run.run_id, args.launcher, args.nproc,
                 port=args.port, timeout_s=args.timeout, nnodes=args.nnodes)
    m = out.result["metrics"]
    print(f"{'bytes':>12}  {'time':>10}  {'algbw GB/s':>10}  {'busbw GB/s':>10}")
    for row in out.result["details"]["sizes"]:
        print(f"{row['bytes']:>12}  {row['time_s'] * 1e6:8.1f}us  {row['algbw_gbps']:10.3f}  "
              f"{row['busbw_gbps']:10.3f}")
    print(f"peak busbw {m['busbw_gbps']:.3f} GB/s at {m['busbw_at_bytes']} B, "
          f"{args.nproc * args.nnodes} ranks, {m['backend_used']}")
    print(f"record: {run.write(m, {'allreduce': out.result['details']['sizes']})}")
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
    from benchlib.launch.launcher import launch

    params = {"nproc_per_node": args.nproc, "nnodes": args.nnodes, "launcher": args.launcher,
              "backend": args.backend, "device": args.device, "matmul_size": args.matmul_size,
              "matmul_repeats": args.matmul_repeats, "matmul_dtype": args.matmul_dtype,
              "slow_rank": args.slow_rank, "slow_factor": args.slow_factor}
    run = common.start_record(args, "doctor", params)
    out = launch("doctor", argv, common.outputs(args) / "logs" / run.run_id, args.launcher,
                 args.nproc, port=args.port, timeout_s=args.timeout, nnodes=args.nnodes)
    figures = out.result["details"]["health"]
    print(out.result["details"]["line"])
    print("\n".join(figures["lines"]))
    health_figures = {k: figures[k] for k in ("devices", "pairs", "one_host", "outliers", "matmul")}
    path = run.write(out.result["metrics"], {"health": figures}, {"health": health_figures})
    print(f"record: {path}")
    return 0


def _distributed_flags(p) -> None:
    """The flags every command that starts ranks takes."""
    p.add_argument("--nproc", type=int, default=2, help="ranks per node")
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


def add_parsers(sub) -> None:
    """`allreduce` and `doctor`, on `sub` (argparse's subparsers)."""
    p = sub.add_parser("allreduce", help="all-reduce bus bandwidth (busbw = algbw x 2(n-1)/n)")
    _distributed_flags(p)
    p.add_argument("--max-bytes", type=int, default=64 * 2**20)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--table", "--study", dest="table", default="allreduce",
                   help="the table the record is filed under (default allreduce; --study is "
                        "its older spelling)")
    p.add_argument("--label", help=common.MEASURE_LABEL_HELP)
    p.set_defaults(func=cmd_allreduce)

    p = sub.add_parser("doctor", help="seed 004's toy test: init, a checked all_reduce, latency")
    _distributed_flags(p)
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
