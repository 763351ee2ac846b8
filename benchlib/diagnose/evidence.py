"""The evidence lines under a diagnosis: each figure the rules judged, with its spread and
the window it is of (benchlib.diagnose.figures), in the order a reader follows a step:
its start-up, its shares, its compute split into forward and backward, the all-reduce,
the ranks, memory, the host's other tasks, the checkpoints."""

from __future__ import annotations

from typing import Any

from benchlib.core import hostload
from benchlib.core.throughput import gap_text, whole_epoch, whole_text, window_text
from benchlib.diagnose import traces
from benchlib.diagnose.figures import Share, rank_steps, stall_share


def seconds(v: float | None) -> str:
    """'2.15 s', '3.2 ms', '6 µs'."""
    if v is None:
        return "?"
    return f"{v:.3g} s" if v >= 1 else f"{v * 1e3:.3g} ms" if v >= 1e-3 else f"{v * 1e6:.3g} µs"


def startup(m: dict[str, Any]) -> list[str]:
    """'start-up: first batch after 2.15 s; 39 samples/s over the whole epoch of 128
    samples against 124 steady over 29 steps, 116 samples timed an epoch (3.2x); the
    steady rate hides it' (the whole epoch projected for the data set where the run
    stopped short of it)."""
    whole = whole_epoch(m)[0]
    if whole is None or m.get("samples_per_s") is None:
        return []
    window = window_text(m)
    gap = gap_text(m) if m.get("startup_gap") is not None else "?"
    return [f"start-up: first batch after {seconds(m.get('first_batch_s'))}; {whole:,.0f} "
            f"samples/s over {whole_text(m)} against {m['samples_per_s']:,.0f} steady"
            + (f" over {window}" if window else "") + f" ({gap})"
            + ("; the steady rate hides it" if m.get("startup_hidden") else "")]


def compute_split(m: dict[str, Any], p: dict[str, Any]) -> list[str]:
    """'compute 92 ms a step: forward 9, backward 83 (DDP's all-reduce inside backward),
    optimizer and the rest 0.4' where the trainer timed the two (a train step's marks)."""
    compute, forward, backward = m.get("compute_s"), m.get("forward_s"), m.get("backward_s")
    if None in (compute, forward, backward):
        return []
    inside = ""
    if (m.get("world_size") or 1) > 1:
        inside = " (FSDP2's all-gathers inside forward, its reduce-scatters inside backward)" \
            if p.get("strategy") == "fsdp2" else " (DDP's all-reduce inside backward)"
    rest = max(compute - forward - backward, 0.0)
    return [f"compute {_ms(compute)} ms a step: forward {_ms(forward)}, backward "
            f"{_ms(backward)}{inside}, optimizer and the rest {_ms(rest)}"]


def _ms(v: float) -> str:
    return f"{v * 1e3:.3g}"


def host(record: dict[str, Any], measured: bool) -> list[str]:
    """The tasks that shared the job's cores during the timed steps, where the record
    counted them; the load at the start, named as what was judged where it did not."""
    m, lines = record.get("metrics") or {}, []
    if measured:
        p90 = m.get("host_others_running_p90")
        lines.append(f"other tasks runnable on the job's {m.get('host_cores')} cores during the "
                     f"timed steps: {m['host_others_running']:.1f} on average (p90 "
                     f"{p90 if p90 is not None else '?'}, {m.get('host_contention_samples')} "
                     f"samples): {m['host_contention']}")
    start = (record.get("host_load") or {}).get("start") or {}
    if start:
        lines.append(f"host at start: {hostload.figures(start)}"
                     + ("" if measured else "; no count during the timed steps in this record: "
                        "judged from the start"))
    return lines


def stall(m: dict[str, Any]) -> list[str]:
    share = stall_share(m)
    if share is None:
        return []
    spread = f" ({share.low:.1%}-{share.high:.1%} at the p10-p90 of a save's stall)" \
        if share.spread else ""
    return [f"checkpoint saves stalled training {share.value:.1%} of its wall time{spread} "
            f"({m.get('checkpoints_written')} saves, {m.get('checkpoint_mode')}, "
            f"{seconds(m.get('checkpoint_blocking_s') or 0)} each)"]


def lines(record: dict[str, Any], part: dict[str, Share | None], skewed,
          measured: bool) -> list[str]:
    """Every evidence line of `record` (`part`: its shares, `skewed`: figures.skew_of,
    `measured`: its host contention counted during the run)."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    out = [f"steps of {m['step_figures_of']}"] if m.get("step_figures_of") else []
    out += startup(m)
    if m.get("window_prefetched_only"):
        steps = m.get("epoch_steps") or m.get("steps")
        out.append(f"the timed window held only batches the workers prefetched at start-up "
                   f"({steps} steps an epoch): no input verdict from it; a longer window "
                   "(max_steps) measures what the workers supply")
    if part["data"] is not None:
        spread = " (95% interval over steps and ranks)" if part["data"].spread else ""
        out.append(f"each step: {part['data'].pct()} waiting for data, "
                   f"{part['compute'].pct()} computing{spread} (data "
                   f"{m['data_s'] * 1e3:.1f} ms, compute {m['compute_s'] * 1e3:.1f} ms, rank 0)")
    out += compute_split(m, p)
    if m.get("comm_s") is not None:
        hidden = m.get("comm_hidden_fraction")
        out.append(f"all-reduce {m['comm_s'] * 1e3:.1f} ms a step, "
                   f"{m['comm_exposed_s'] * 1e3:.1f} ms of it not hidden by backward"
                   + (f" ({hidden:.0%} hidden)" if hidden is not None else "")
                   + (f": {part['comm'].pct()} of a step" if part["comm"] else ""))
    if m.get("comm_unknown"):
        out.append(f"communication unknown: {m['comm_unknown']}; the compute share includes it")
    trace_dir = (record.get("details") or {}).get("trace_dir")
    if trace_dir:  # HTA's view of the same steps, where it can see them
        out += traces.evidence(trace_dir)
    if skewed is not None:
        slowest, skew, _ = skewed
        out.append(f"each rank's own work a step: "
                   f"{', '.join(f'{s * 1e3:.0f}' for s in rank_steps(record))} ms; the slowest "
                   f"(rank {slowest}) {skew.value:.2f}x the others' median"
                   + (f" ({skew.low:.2f}-{skew.high:.2f} over steps)" if skew.spread else ""))
    if m.get("alloc_retries") is not None:
        out.append(f"CUDA allocator: {m['alloc_retries']} retries, {m.get('ooms')} OOMs, "
                   f"peak reserved {m.get('peak_reserved_bytes', 0) / 2**30:.1f} GiB")
    return out + host(record, measured) + stall(m)
