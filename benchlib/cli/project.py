"""`benchlib project` (docs/projection.md): the projection's command line, over the model
in benchlib.analysis.projection and the check against seed 003 in
benchlib.analysis.projection_check."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from benchlib.analysis import projection_check
from benchlib.analysis.projection import (
    DEFAULT_BUCKET_MB,
    HOW,
    MAX_DEVICES_PER_NODE,
    MAX_NODES,
    MODEL_PARAMS,
    WHAT_IF,
    Inputs,
    _positive,
    default_sizes,
    describe,
    format_projection,
    project,
    what_if,
)
from benchlib.errors import BenchlibError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line through UsageError, like every other bad input
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="benchlib project", description="Project throughput, speedup and "
                "efficiency to more devices and nodes; see docs/projection.md.")
    p.add_argument("--check-dlperf", action="store_true",
                   help="fit 1-node rows, predict 16/32-GPU rows: seed 003 in-sample and "
                   "leave-one-framework-out, DLPerf's pages out-of-sample, beside a naive baseline")
    p.add_argument("--samples-per-s", type=float, help="one device's training samples/s")
    p.add_argument("--step-s", type=float, help="or one device's step time (s)")
    p.add_argument("--batch-size", type=int, help="per device")
    p.add_argument("--model", help=f"gradient size from: {', '.join(MODEL_PARAMS)}")
    p.add_argument("--grad-bytes", type=float, help="or the gradient size in bytes")
    p.add_argument("--bucket-mb", type=float, help=f"all-reduce bucket (default {DEFAULT_BUCKET_MB:g})")
    p.add_argument("--overlap", type=float, help="share of the all-reduce backward hides (default 0)")
    p.add_argument("--intra-busbw", type=float, help="GB/s among a node's devices")
    p.add_argument("--inter-busbw", type=float, help="GB/s between nodes")
    p.add_argument("--input-ceiling", help="samples/s the data path of one node delivers, or none")
    p.add_argument("--devices-per-node", type=int,
                   help=f"devices (or CPU ranks) per node, 1 to {MAX_DEVICES_PER_NODE}")
    p.add_argument("--nodes", help=f"comma-separated node counts, each 1 to {MAX_NODES} "
                   "(default: up to 1024 devices)")
    p.add_argument("--strategy", choices=["ddp", "dp"], default="ddp")
    p.add_argument("--single-process-limit", type=float, help="dp: samples/s of one process per node")
    p.add_argument("--host-cores", type=float,
                   help="CPU ranks: the cores free for one node's ranks (may be a fraction)")
    p.add_argument("--compute-threads", type=int,
                   help="CPU ranks: the threads the one-device figure was measured with")
    p.add_argument("--what-if", action="append", default=[], metavar="NAME=VALUE|NAME=Nx",
                   help=f"repeatable; NAME one of {', '.join(WHAT_IF)}")
    p.add_argument("--source", action="append", default=[], metavar="INPUT=TEXT",
                   help="where an input came from (a run id, a data sheet); repeatable")
    return p


def _ceiling(text: str | None) -> float | None:
    try:
        return math.inf if text == "none" else None if text is None else float(text)
    except ValueError:
        raise UsageError(f"input_ceiling: {text!r} is not a number; {HOW['input_ceiling']}") from None


def _compute_s(args) -> float | None:
    _positive("batch_size", args.batch_size, HOW["batch_size"])
    if args.samples_per_s is not None and args.step_s is not None:
        raise UsageError("compute_s: give --samples-per-s or --step-s, not both")
    if args.samples_per_s is not None:
        _positive("samples_per_s", args.samples_per_s, HOW["compute_s"])
        return args.batch_size / args.samples_per_s
    return args.step_s


def _grad_bytes(args) -> tuple[float | None, str]:
    if args.grad_bytes is not None or args.model is None:
        return args.grad_bytes, "given"
    if args.model not in MODEL_PARAMS:
        raise UsageError(f"grad_bytes: unknown model {args.model!r} (known: "
                         f"{', '.join(MODEL_PARAMS)}); {HOW['grad_bytes_unknown']}")
    n = MODEL_PARAMS[args.model]
    return 4.0 * n, f"{args.model}: {n:,} parameters x 4 bytes (fp32 gradients), torchvision"


def _sources(args, grad_source: str) -> dict[str, str]:
    """Where an input came from when not simply given: a default's reason, or --source."""
    sources = {"grad_bytes": grad_source}
    if args.bucket_mb is None:
        sources["bucket_bytes"] = f"default: DDP's bucket_cap_mb, {DEFAULT_BUCKET_MB:g} MiB"
    if args.overlap is None:
        sources["overlap"] = "default: nothing hidden (the upper bound of comm)"
    if args.samples_per_s is not None:
        sources["compute_s"] = f"given: {args.samples_per_s:g} samples/s of one device"
    if args.input_ceiling == "none":
        sources["input_ceiling"] = "declared unlimited (--input-ceiling none)"
    names = [f.name for f in dataclasses.fields(Inputs) if f.name != "sources"]
    for item in args.source:
        name, _, text = item.partition("=")
        if name not in names:
            raise UsageError(f"source: {name!r} is not an input ({', '.join(names)})")
        sources[name] = text
    return sources


def inputs_from_args(args) -> tuple[Inputs, list[tuple[int, int]]]:
    if args.strategy == "dp" and args.single_process_limit is None:
        raise UsageError(f"single_process_limit: missing; {HOW['single_process_limit']}")
    _positive("devices_per_node", args.devices_per_node, HOW["devices_per_node"])
    try:
        nodes = [int(n) for n in args.nodes.split(",")] if args.nodes is not None else None
    except ValueError:
        raise UsageError(f"nodes: {args.nodes!r} is not a comma-separated list of counts") from None
    grad, grad_source = _grad_bytes(args)
    inp = Inputs(compute_s=_compute_s(args), batch_size=args.batch_size, grad_bytes=grad,
                 devices_per_node=args.devices_per_node, input_ceiling=_ceiling(args.input_ceiling),
                 intra_busbw_gbps=args.intra_busbw, inter_busbw_gbps=args.inter_busbw,
                 overlap=0.0 if args.overlap is None else args.overlap,
                 bucket_bytes=(DEFAULT_BUCKET_MB if args.bucket_mb is None else args.bucket_mb) * 2**20,
                 single_process_limit=args.single_process_limit if args.strategy == "dp" else None,
                 host_cores=args.host_cores, compute_threads=args.compute_threads,
                 sources=_sources(args, grad_source))
    return inp, default_sizes(args.devices_per_node, nodes)


def main(argv: list[str] | None = None) -> int:
    """`benchlib project`: a projection from given inputs, or --check-dlperf."""
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
        if args.check_dlperf:
            inter = projection_check.INTER_BUSBW_GBPS if args.inter_busbw is None else args.inter_busbw
            _positive("inter_busbw_gbps", inter, HOW["inter_busbw_gbps"])
            print(projection_check.report(inter))
            return 0
        inp, sizes = inputs_from_args(args)
        table = project(inp, sizes)
        # every what-if is checked and projected before anything is printed
        what_ifs = [(spec, project(what_if(inp, spec), sizes)) for spec in args.what_if]
        print(describe(inp).to_string(index=False), format_projection(table), sep="\n\n")
        for spec, changed in what_ifs:
            print(f"\nwhat if {spec}:", format_projection(changed), sep="\n")
        return 0
    except BenchlibError as e:
        print(f"benchlib project: {e}", file=sys.stderr)
        return e.status()


if __name__ == "__main__":
    raise SystemExit(main())
