"""`benchlib project` (docs/projection.md): the projection's command line, over the model
in benchlib.projection.scaling and the check against seed 003 in
benchlib.projection.check_seed003; with `--mtbf`, how often to checkpoint (Daly's interval,
benchlib.core.goodput) from a save's measured cost."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from benchlib import paths
from benchlib.config.checkpoint import parse_duration
from benchlib.config.flags import add_config_flags
from benchlib.config.project import CheckpointPlanConfig, ProjectConfig
from benchlib.core import goodput
from benchlib.errors import BenchlibError, UsageError
from benchlib.projection import check_seed003, check_torchtitan
from benchlib.projection.scaling import (
    DEFAULT_BUCKET_MB,
    HOW,
    MODEL_PARAMS,
    Inputs,
    _positive,
    default_sizes,
    describe,
    flops_per_token,
    format_projection,
    project,
    what_if,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line through UsageError, like every other bad input
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """The command's flags, generated from its configs (benchlib.config.project): the
    projection's inputs, then how often to checkpoint."""
    p = _Parser(prog="benchlib project", description="Project throughput, speedup and "
                "efficiency to more devices and nodes; see docs/projection.md.")
    add_config_flags(p, ProjectConfig)
    add_config_flags(p.add_argument_group("how often to checkpoint (--mtbf)"),
                     CheckpointPlanConfig)
    return p


def _checkpoint_record(run_id: str) -> dict:
    """The record `run_id` (or the newest ok one) that measured a save's blocking cost."""
    from benchlib.records.read import read_records

    found = [r for r in read_records(paths.outputs_dir() / "results")
             if r.get("status") == "ok" and (r.get("metrics") or {}).get("checkpoint_blocking_s")
             and run_id in ("newest", r.get("run_id"))]
    if not found:
        raise UsageError(f"checkpoint_run: no ok record {'' if run_id == 'newest' else run_id + ' '}"
                         "with a measured checkpoint cost under the results folder; run notebook "
                         "35 (or a training worker with --checkpoint-every), or give --checkpoint-s")
    return max(found, key=lambda r: r.get("started_at") or "")


def checkpoint_plan(args) -> str:
    """`--mtbf`: Daly's interval for C, R and D, the exact goodput at it and at the run's
    own interval, Young's and the first-order goodput as the check (benchlib.core.goodput)."""
    mtbf = parse_duration("mtbf", args.mtbf)
    given = {"cost": args.checkpoint_s, "restart": args.restart_s, "durable": args.durable_s,
             "own": args.interval_s}
    found = {k: (None, "") for k in given}
    if args.checkpoint_run:
        rec = _checkpoint_record(args.checkpoint_run)
        where = f"run {rec['run_id']}: "
        found = {k: (v, where + how) for k, (v, how) in goodput.record_inputs(
            rec["metrics"], (rec.get("params") or {}).get("checkpoint_every")).items()}
    value = {k: given[k] if given[k] is not None else found[k][0] for k in given}
    source = {k: "given" if given[k] is not None else found[k][1] for k in given}
    if value["cost"] is None:
        raise UsageError("checkpoint_s: missing; give --checkpoint-s, or --checkpoint-run with "
                         "a record that measured it")
    plan = goodput.plan(value["cost"], mtbf, value["restart"] or 0.0, value["own"],
                        value["durable"] or 0.0)
    cost, restart, durable = value["cost"], value["restart"], value["durable"]
    longer = ", lengthened to D" if plan["interval_lengthened_to_durable"] else ""
    lines = ["How often to checkpoint: Daly's interval, exact goodput for exponential failures",
             f"  C, a save's cost      {cost:.4g} s  ({source['cost']})",
             f"  MTBF                  {args.mtbf} = {mtbf:,.0f} s",
             "  R, back to training   " + (f"{restart:.4g} s  ({source['restart']})" if restart
                                            else "0 s (not given: restarts cost nothing here)"),
             f"  D, until durable      {durable:.4g} s  ({source['durable']})" if durable else
             "  D, until durable      0 s (durable when training resumes)",
             f"  interval              {plan['daly_interval_s']:,.1f} s of training{longer}",
             f"  goodput at it         {plan['goodput_at_daly']:.2%}"]
    if value["own"] is not None:
        lines.append(f"  goodput at the run's  {plan['goodput_at_own_interval']:.2%}, a save every "
                     f"{value['own']:.4g} s of training  ({source['own']})"
                     if plan.get("goodput_at_own_interval") is not None
                     else f"  the run's interval    refused: {plan['own_interval_refused']}")
    lines.append(f"  check: Young's sqrt(2 C MTBF) {plan['young_interval_s']:,.1f} s; the first-"
                 f"order goodput at {plan['daly_interval_s']:,.1f} s "
                 f"{plan['goodput_first_order_at_daly']:.2%}")
    caveat = goodput.first_order_caveat(plan)
    if caveat:
        lines.append(f"  caveat: {caveat}")
    return "\n".join(lines)


def _ceiling(text: str | None) -> float | None:
    try:
        return math.inf if text == "none" else None if text is None else float(text)
    except ValueError:
        raise UsageError(f"input_ceiling: {text!r} is not a number; {HOW['input_ceiling']}") from None


LM_HOW = ("give --flops-per-token, or --params, --layers, --d-model and --seq-len "
          "(6N + 12 L d_model T, PaLM appendix B)")


def _lm_tokens_per_s(args) -> float | None:
    """One device's tokens/s, given (--tokens-per-s) or as MFU x peak / FLOPs per token."""
    if args.mfu is None and args.peak_tflops is None:
        return args.tokens_per_s
    if args.tokens_per_s is not None:
        raise UsageError("compute_s: give one of --tokens-per-s and --mfu (with --peak-tflops), "
                         "not both")
    _positive("mfu", args.mfu, "give --mfu and --peak-tflops together")
    _positive("peak_tflops", args.peak_tflops, "give --mfu and --peak-tflops together")
    if args.mfu > 1:
        raise UsageError(f"mfu: must be between 0 and 1, got {args.mfu}")
    flops = args.flops_per_token
    if flops is None:
        for name in ("params", "layers", "d_model", "seq_len"):
            _positive(name, getattr(args, name), LM_HOW)
        flops = flops_per_token(args.params, args.layers, args.d_model, args.seq_len)
    _positive("flops_per_token", flops, LM_HOW)
    return args.mfu * args.peak_tflops * 1e12 / flops


def _compute_s(args) -> float | None:
    _positive("batch_size", args.batch_size, HOW["batch_size"])
    tokens = _lm_tokens_per_s(args)
    given = [name for name, value in (("--samples-per-s", args.samples_per_s), ("--step-s", args.step_s),
             ("--tokens-per-s or --mfu", tokens)) if value is not None]
    if len(given) > 1:
        raise UsageError(f"compute_s: give one of --samples-per-s, --step-s, --tokens-per-s, "
                         f"--mfu; got {' and '.join(given)}")
    if tokens is not None:
        _positive("tokens_per_s", tokens, HOW["compute_s"])
        _positive("seq_len", args.seq_len, "tokens/s need --seq-len, the tokens per sequence")
        return args.batch_size * args.seq_len / tokens
    if args.samples_per_s is not None:
        _positive("samples_per_s", args.samples_per_s, HOW["compute_s"])
        return args.batch_size / args.samples_per_s
    return args.step_s


def _params(args) -> tuple[float | None, str]:
    if args.params is not None:
        _positive("params", args.params, "give --params, the model's parameter count")
        return args.params, f"{args.params:,.0f} parameters"
    if args.model is None:
        return None, ""
    if args.model not in MODEL_PARAMS:
        raise UsageError(f"model: unknown model {args.model!r} (known: "
                         f"{', '.join(MODEL_PARAMS)}); {HOW['grad_bytes_unknown']}")
    return MODEL_PARAMS[args.model], f"{args.model}: {MODEL_PARAMS[args.model]:,} parameters"


def _bytes(args) -> tuple[float | None, float | None, dict[str, str]]:
    """(grad_bytes, gather_bytes, their sources) from --grad-bytes or the parameter count."""
    params, counted = _params(args)
    reduce_bytes = 4.0 if args.reduce_bytes is None else args.reduce_bytes
    param_bytes = 2.0 if args.param_bytes is None else args.param_bytes
    _positive("reduce_bytes", reduce_bytes, "give --reduce-bytes (4 for fp32, 2 for bf16)")
    _positive("param_bytes", param_bytes, "give --param-bytes (2 for bf16, 4 for fp32)")
    if args.strategy == "fsdp2" and params is None:
        raise UsageError(f"params: missing; {HOW['gather_bytes']}")
    sources = {}
    if args.grad_bytes is not None or params is None:
        grad = args.grad_bytes
    else:
        grad = reduce_bytes * params
        kind = "fp32" if reduce_bytes == 4 else f"{reduce_bytes:g}-byte"
        sources["grad_bytes"] = (f"{counted} x {reduce_bytes:g} bytes ({kind} gradients)"
                                 + (", torchvision" if args.params is None else ""))
    gather = None
    if args.strategy == "fsdp2":
        gather = param_bytes * params
        kind = "bf16" if param_bytes == 2 else f"{param_bytes:g}-byte"
        sources["gather_bytes"] = f"{counted} x {param_bytes:g} bytes ({kind} parameters)"
    return grad, gather, sources


def _sources(args, byte_sources: dict[str, str]) -> dict[str, str]:
    """Where an input came from when not simply given: a default's reason, or --source."""
    sources = dict(byte_sources)
    if args.bucket_mb is None:
        sources["bucket_bytes"] = f"default: DDP's bucket_cap_mb, {DEFAULT_BUCKET_MB:g} MiB"
    if args.overlap is None:
        sources["overlap"] = "default: nothing hidden (the upper bound of comm)"
    if args.samples_per_s is not None:
        sources["compute_s"] = f"given: {args.samples_per_s:g} samples/s of one device"
    if args.tokens_per_s is not None:
        sources["compute_s"] = f"given: {args.tokens_per_s:g} tokens/s of one device"
    elif args.mfu is not None:
        sources["compute_s"] = (f"MFU {args.mfu:g} of {args.peak_tflops:g} TFLOP/s over "
                                + (f"{args.flops_per_token:g} FLOPs per token" if args.flops_per_token
                                   else "6N + 12 L d_model T FLOPs per token (PaLM appendix B)"))
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
    grad, gather, byte_sources = _bytes(args)
    inp = Inputs(compute_s=_compute_s(args), batch_size=args.batch_size, grad_bytes=grad,
                 devices_per_node=args.devices_per_node, input_ceiling=_ceiling(args.input_ceiling),
                 intra_busbw_gbps=args.intra_busbw, inter_busbw_gbps=args.inter_busbw,
                 overlap=0.0 if args.overlap is None else args.overlap,
                 bucket_bytes=(DEFAULT_BUCKET_MB if args.bucket_mb is None else args.bucket_mb) * 2**20,
                 single_process_limit=args.single_process_limit if args.strategy == "dp" else None,
                 host_cores=args.host_cores, compute_threads=args.compute_threads,
                 strategy="fsdp2" if args.strategy == "fsdp2" else "ddp", gather_bytes=gather,
                 layers=args.layers if args.strategy == "fsdp2" else None, seq_len=args.seq_len,
                 sources=_sources(args, byte_sources))
    return inp, default_sizes(args.devices_per_node, nodes)


def main(argv: list[str] | None = None) -> int:
    """`benchlib project`: a projection from given inputs, or --check-dlperf."""
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
        if args.mtbf is not None:
            print(checkpoint_plan(args))
            return 0
        if args.check == "torchtitan":
            print(check_torchtitan.report())
            return 0
        if args.check_dlperf or args.check == "dlperf":
            inter = check_seed003.INTER_BUSBW_GBPS if args.inter_busbw is None else args.inter_busbw
            _positive("inter_busbw_gbps", inter, HOW["inter_busbw_gbps"])
            print(check_seed003.report(inter))
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
