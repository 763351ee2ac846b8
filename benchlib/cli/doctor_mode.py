"""`benchlib doctor`'s two modes: with --init-method this process is one rank of a
tcp:// group; without it, doctor starts --nproc ranks here. A flag of the other mode is
refused, never ignored."""

from __future__ import annotations

from benchlib.errors import UsageError


def doctor_mode(args) -> None:
    """--init-method: this process is one rank (--rank, --world-size); without it doctor
    starts --nproc ranks here. A flag of the other mode is refused, never ignored."""
    from benchlib.distributed.env import check_rank

    local = {"nproc": args.nproc, "launcher": args.launcher, "port": args.port,
             "nnodes": args.nnodes}
    if not args.init_method:
        for name in ("rank", "world_size"):
            if getattr(args, name) is not None:
                raise UsageError(f"{name}: --rank and --world-size only mean something with "
                                 "--init-method tcp://HOST:PORT (this process as one rank); "
                                 "without it doctor starts --nproc ranks here")
        args.nproc = 2 if args.nproc is None else args.nproc
        args.launcher = args.launcher or "torchrun"
        return
    for name, value in local.items():
        if value is not None:
            raise UsageError(f"{name}: --{name} is for the ranks doctor starts here; with "
                             "--init-method this process is one rank (--rank, --world-size, "
                             "the port in the init method)")
    args.rank = 0 if args.rank is None else args.rank
    args.world_size = 2 if args.world_size is None else args.world_size
    check_rank(args.rank, args.world_size)
    args.nproc, args.nnodes = args.world_size, 1
