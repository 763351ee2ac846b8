"""What holds a run back, and which measured change helps (`python -m benchlib diagnose`, a
column of the report's run tables).

A training record carries the evidence: the start-up beside the steady rate (the first
batch's wait, the whole-epoch rate), each share of a step (waiting for data, DDP's
all-reduce nothing hid, the rank's own compute) and the slowest rank's skew over the
others, each with its spread over steps and ranks (benchlib.core.throughput), CUDA's
allocation retries and OOMs, and how busy the host was at the start; where the run left
Kineto traces (`export_trace`), Holistic Trace Analysis' breakdowns of them on a CUDA run
(benchlib.diagnose.traces). The bottleneck is the first of these rules that holds:

  host-contended        at the start, the host's 1-minute load exceeded its cores or other
                        tasks were running on every core (benchlib.core.hostload): named
                        before any other cause, whose figures include the contention
  start-up-bound        the steady rate is more than STARTUP_GAP x the whole-epoch rate
  straggler             one rank's own work a step >= STRAGGLER x the other ranks' median,
                        its extra time >= STRAGGLER_SHARE of a step
  input-bound           >= INPUT_SHARE of each step waits for data (not from a window of
                        batches prefetched at start-up only)
  communication-bound   >= COMM_SHARE of each step is all-reduce nothing hides
  memory-bound          the allocator retried (freed its cache to find room) or ran out
  checkpoint-stalled    saving checkpoints stalled training > CHECKPOINT_SHARE of the wall time
  launch-bound          a CUDA step shorter than LAUNCH_S: kernels too small to fill the GPU
  compute-bound         >= COMPUTE_SHARE of each step computes
  no single bottleneck  none of the above

A share (or the skew) holds its rule when its whole spread is at or above the threshold;
where the spread straddles it the verdict is "borderline: X or Y" (Y what the rules after
it give), never X alone. Where a run's communication is unknown (FSDP2, Lightning, DDP
without the comm hook) no communication verdict is drawn, and a compute share that would
hold is "borderline: compute-bound or communication-bound". The thresholds' basis and the
cases built to check them are in docs/diagnose.md. The advice (benchlib.diagnose.advice)
quotes what records of the same work measured, else the command that measures it; for
checkpoint stalls, an asynchronous save or Young/Daly's interval (`benchlib project --mtbf`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from benchlib import studies
from benchlib.config.studies import GPU_CHECK
from benchlib.core import hostload
from benchlib.core.stats import STARTUP_GAP
from benchlib.core.throughput import startup_text
from benchlib.diagnose import advice, compile_advice, pipeline, traces

STRAGGLER = 1.25  # a rank this many times the other ranks' median
STRAGGLER_SHARE = 0.20  # and its extra time at least this share of a step (not noise)
INPUT_SHARE = 0.30
COMM_SHARE = 0.30
COMPUTE_SHARE = 0.70
LAUNCH_S = 0.002  # 2 ms: below this a CUDA step is mostly launch overhead
CHECKPOINT_SHARE = 0.05  # saves stalling training this share of its wall time (issue 41)
BOTTLENECKS = ("host-contended", "start-up-bound", "straggler", "input-bound",
               "communication-bound", "memory-bound", "checkpoint-stalled", "launch-bound",
               "compute-bound", "no single bottleneck")
HOLDS, STRADDLES, FAILS = "holds", "straddles", "fails"


@dataclass
class Diagnosis:
    run_id: str
    bottleneck: str
    evidence: list[str] = field(default_factory=list)
    advice: str = ""
    caveat: str = ""
    try_params: dict[str, Any] = field(default_factory=dict)  # the change `--try` runs

    def text(self) -> str:
        lines = [f"{self.run_id}: {self.bottleneck}", *(f"  {e}" for e in self.evidence)]
        if self.advice:
            lines.append(f"  advice: {self.advice}")
        if self.caveat:
            lines.append(f"  caveat: {self.caveat}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Share:
    """A share of a step (or the skew) with its spread; low = high where none was kept."""

    value: float
    low: float
    high: float
    spread: bool = True

    def state(self, threshold: float) -> str:
        return HOLDS if self.low >= threshold else FAILS if self.high < threshold else STRADDLES

    def pct(self) -> str:
        return f"{self.value:.0%}" + (f" ({self.low:.0%}-{self.high:.0%})" if self.spread else "")


def _share(m: dict[str, Any], name: str, fallback: float | None) -> Share | None:
    """`name` with its spread as the record keeps it, else the point `fallback` (an older
    record, or one built by hand)."""
    if m.get(name) is not None and m.get(f"{name}_low") is not None:
        return Share(m[name], m[f"{name}_low"], m[f"{name}_high"])
    return None if fallback is None else Share(fallback, fallback, fallback, spread=False)


def shares(m: dict[str, Any]) -> dict[str, Share | None]:
    """data, compute and exposed communication as shares of a step, with their spread over
    steps and ranks where the record keeps it; else from rank 0's mean times."""
    data, compute = m.get("data_s"), m.get("compute_s")
    point = {"data": None, "compute": None, "comm": None}
    if data is not None and compute is not None and data + compute > 0:
        step = data + compute
        exposed = m.get("comm_exposed_s")  # inside compute_s: the step's wait for the all-reduce
        point = {"data": data / step, "compute": max(compute - (exposed or 0.0), 0.0) / step,
                 "comm": exposed / step if exposed is not None else None}
    return {"data": _share(m, "data_share", point["data"]),
            "compute": _share(m, "compute_share", point["compute"]),
            "comm": _share(m, "comm_share", point["comm"])}


def rank_steps(record: dict[str, Any]) -> list[float]:
    """Each rank's own work per step, the median over the record's epochs: as each epoch
    keeps it (`rank_own_s`), else its mean step less the all-reduce time nothing hid on
    that rank. In synchronous DDP every rank's step lasts as long as the slowest's, the
    fast ones waiting inside the all-reduce: without that wait taken out, a straggler
    would not show."""
    kept = (record.get("details") or {}).get("epochs", [])
    own = [e["rank_own_s"] for e in kept if isinstance(e.get("rank_own_s"), list) and e["rank_own_s"]]
    if own:
        return [statistics.median(o[r] for o in own) for r in range(len(own[0]))]
    epochs = [e.get("rank_step_s") for e in kept]
    epochs = [e for e in epochs if isinstance(e, list) and e]
    if not epochs:
        return []
    steps = [statistics.median(e[r] for e in epochs if r < len(e)) for r in range(len(epochs[0]))]
    waits = (record.get("details") or {}).get("rank_comm_exposed_s")
    if isinstance(waits, list) and len(waits) == len(steps) and None not in waits:
        steps = [max(s - w, 0.0) for s, w in zip(steps, waits)]
    return steps


def skew_of(record: dict[str, Any]) -> tuple[int, Share, float] | None:
    """(the slowest rank, its skew over the others with its spread, its extra time as a
    share of a step), for a run of several ranks."""
    m, steps = record.get("metrics") or {}, rank_steps(record)
    if len(steps) < 2:
        return None
    slowest = max(range(len(steps)), key=steps.__getitem__)
    others = statistics.median(s for r, s in enumerate(steps) if r != slowest)
    # the others did nothing of their own (all waiting): any work of the slowest's stands out
    point = steps[slowest] / others if others > 0 else (float("inf") if steps[slowest] else 1.0)
    skew = _share(m, "rank_skew", point)
    step = (m.get("data_s") or 0) + (m.get("compute_s") or 0)
    return slowest, skew, (steps[slowest] - others) / step if step > 0 else 0.0


def _seconds(v: float | None) -> str:
    """'2.15 s', '3.2 ms', '6 µs'."""
    if v is None:
        return "?"
    return f"{v:.3g} s" if v >= 1 else f"{v * 1e3:.3g} ms" if v >= 1e-3 else f"{v * 1e6:.3g} µs"


def _evidence(record: dict[str, Any], part: dict[str, Share | None], skewed) -> list[str]:
    m = record.get("metrics") or {}
    lines = [f"steps of {m['step_figures_of']}"] if m.get("step_figures_of") else []
    if m.get("epoch_samples_per_s") is not None and m.get("samples_per_s") is not None:
        lines.append(f"start-up: first batch after {_seconds(m.get('first_batch_s'))}; "
                     f"{m['epoch_samples_per_s']:,.0f} samples/s over the whole epoch against "
                     f"{m['samples_per_s']:,.0f} steady ({m.get('startup_gap', 0):.1f}x)"
                     + ("; the steady rate hides it" if m.get("startup_hidden") else ""))
    if m.get("window_prefetched_only"):
        lines.append(f"the timed window held only batches the workers prefetched at start-up "
                     f"({m.get('steps')} steps an epoch): no input verdict from it; a longer "
                     "window (max_steps) measures what the workers supply")
    if part["data"] is not None:
        spread = " (95% interval over steps and ranks)" if part["data"].spread else ""
        lines.append(f"each step: {part['data'].pct()} waiting for data, "
                     f"{part['compute'].pct()} computing{spread} (data "
                     f"{m['data_s'] * 1e3:.1f} ms, compute {m['compute_s'] * 1e3:.1f} ms, rank 0)")
    if m.get("comm_s") is not None:
        hidden = m.get("comm_hidden_fraction")
        lines.append(f"all-reduce {m['comm_s'] * 1e3:.1f} ms a step, "
                     f"{m['comm_exposed_s'] * 1e3:.1f} ms of it not hidden by backward"
                     + (f" ({hidden:.0%} hidden)" if hidden is not None else "")
                     + (f": {part['comm'].pct()} of a step" if part["comm"] else ""))
    if m.get("comm_unknown"):
        lines.append(f"communication unknown: {m['comm_unknown']}; the compute share includes it")
    trace_dir = (record.get("details") or {}).get("trace_dir")
    if trace_dir:  # HTA's view of the same steps, where it can see them
        lines += traces.evidence(trace_dir)
    if skewed is not None:
        slowest, skew, _ = skewed
        lines.append(f"each rank's own work a step: "
                     f"{', '.join(f'{s * 1e3:.0f}' for s in rank_steps(record))} ms; the slowest "
                     f"(rank {slowest}) {skew.value:.2f}x the others' median"
                     + (f" ({skew.low:.2f}-{skew.high:.2f} over steps)" if skew.spread else ""))
    if m.get("alloc_retries") is not None:
        lines.append(f"CUDA allocator: {m['alloc_retries']} retries, {m.get('ooms')} OOMs, "
                     f"peak reserved {m.get('peak_reserved_bytes', 0) / 2**30:.1f} GiB")
    load = (record.get("host_load") or {}).get("start") or {}
    if load:
        lines.append(f"host at start: {hostload.figures(load)}")
    stalled = m.get("checkpoint_stall_share")
    if stalled is not None:
        lines.append(f"checkpoint saves stalled training {stalled:.1%} of its wall time "
                     f"({m.get('checkpoints_written')} saves, {m.get('checkpoint_mode')}, "
                     f"{_seconds(m.get('checkpoint_blocking_s') or 0)} each)")
    return lines


def _rules(record: dict[str, Any], part: dict[str, Share | None], skewed) -> list[tuple]:
    """(bottleneck, state, its borderline partner or None) of each rule, in order."""
    m = record.get("metrics") or {}
    busy = bool((record.get("host_load") or {}).get("busy"))
    unknown = bool(m.get("comm_unknown"))

    def by(share: Share | None, threshold: float) -> str:
        return FAILS if share is None else share.state(threshold)

    straggler = FAILS
    if skewed is not None and skewed[2] >= STRAGGLER_SHARE:
        straggler = skewed[1].state(STRAGGLER)
    cuda_step = m.get("batch_s") if m.get("device_type") == "cuda" else None
    compute = by(part["compute"], COMPUTE_SHARE)
    return [
        ("host-contended", HOLDS if busy else FAILS, None),
        ("start-up-bound", HOLDS if m.get("startup_hidden") else FAILS, None),
        ("straggler", straggler, None),
        ("input-bound", FAILS if m.get("window_prefetched_only")
         else by(part["data"], INPUT_SHARE), None),
        ("communication-bound", FAILS if unknown else by(part["comm"], COMM_SHARE), None),
        ("memory-bound", HOLDS if (m.get("alloc_retries") or 0) > 0 or (m.get("ooms") or 0) > 0
         else FAILS, None),
        ("checkpoint-stalled", HOLDS if (m.get("checkpoint_stall_share") or 0) > CHECKPOINT_SHARE
         else FAILS, None),
        ("launch-bound", HOLDS if cuda_step is not None and cuda_step < LAUNCH_S else FAILS, None),
        # the compute share of a run whose communication is unknown includes it
        ("compute-bound", STRADDLES if unknown and compute != FAILS else compute,
         "communication-bound" if unknown else None),
    ]


def first_bottleneck(rules: list[tuple]) -> tuple[str, str]:
    """(bottleneck, the rule it came from): the first rule that holds; where the first
    that does not fail straddles its threshold, 'borderline: X or Y'."""
    live = [(name, state, partner) for name, state, partner in rules if state != FAILS]
    if not live:
        return "no single bottleneck", ""
    name, state, partner = live[0]
    if state == HOLDS:
        return name, name
    other = partner or (live[1][0] if len(live) > 1 else "no single bottleneck")
    return f"borderline: {name} or {other}", name


def diagnose(record: dict[str, Any], same_testbed: pd.DataFrame | None = None) -> Diagnosis:
    """The bottleneck of one record, its evidence lines and the advice (measured where
    `same_testbed`, a frame of this testbed's records, holds the same work changed)."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    part, skewed = shares(m), skew_of(record)
    rules = _rules(record, part, skewed)
    bottleneck, rule = first_bottleneck(rules)
    d = Diagnosis(record.get("run_id", "?"), bottleneck, _evidence(record, part, skewed))
    if bottleneck.startswith("borderline"):
        d.advice = _borderline_advice(rule, part, skewed, m)
    elif rule == "host-contended":
        rest, _ = first_bottleneck(rules[1:])
        d.advice = ("rerun on a quiet host (or a node of its own: sbatch --exclusive); its "
                    f"figures alone would read {rest}, which the contention may have made")
    elif rule == "start-up-bound":
        d.advice = advice.startup_advice(record)
    elif rule == "straggler":
        slowest, skew, _ = skewed
        nproc = len(rank_steps(record))
        d.advice = (f"rank {slowest} is {skew.value:.2f}x the other ranks: find the slow device "
                    f"or node with {_doctor_command(p, nproc)}, then leave it out or fix it")
        # one node whose last rank is the slow one: fewer ranks per node leave exactly it out
        if p.get("nproc_per_node") == nproc and slowest == nproc - 1 and nproc > 1:
            d.try_params = {"nproc_per_node": nproc - 1}
    elif rule == "input-bound":
        d.advice, d.try_params = (pipeline if m.get("shard_format") else advice).input_advice(record, same_testbed)
    elif rule == "communication-bound":
        d.advice, d.try_params = advice.comm_advice(record, part["comm"].value, same_testbed)
    elif rule == "memory-bound":
        d.advice = (f"the allocator retried {m.get('alloc_retries')} times: the batch is near "
                    f"the memory's edge; `python -m benchlib maxbatch --model {p.get('model')}` "
                    "finds the largest that trains, activation checkpointing (notebook 50) "
                    "trades compute for memory")
    elif rule == "checkpoint-stalled":
        d.advice, d.try_params = advice.checkpoint_advice(m, p, record.get("run_id", "RUN"))
    elif rule == "launch-bound":
        d.advice = (f"a step takes {m['batch_s'] * 1e3:.2f} ms: too little work per kernel "
                    "launch; a larger batch, or torch.compile (fewer, fused kernels)")
    elif rule == "compute-bound":
        d.advice, d.try_params = advice.compute_advice(record, same_testbed)
        d.advice += compile_advice.sentence(record, same_testbed)  # measured, or its command
    hidden = startup_text(m)
    if hidden and rule != "start-up-bound":
        d.caveat = hidden
    return d


def _borderline_advice(rule: str, part: dict, skewed, m: dict[str, Any]) -> str:
    """Why no verdict: the share whose spread straddles its threshold, and what narrows it."""
    if rule == "compute-bound" and m.get("comm_unknown"):
        return (f"{m['comm_unknown']}, so computing and communicating are not told apart "
                f"({part['compute'].pct()} of a step is both)")
    share, threshold, what = {
        "straggler": (skewed[1] if skewed else None, STRAGGLER, "the slowest rank's skew"),
        "input-bound": (part["data"], INPUT_SHARE, "the data share"),
        "communication-bound": (part["comm"], COMM_SHARE, "the all-reduce share"),
        "compute-bound": (part["compute"], COMPUTE_SHARE, "the compute share"),
    }[rule]
    shown = f"{share.low:.2f}-{share.high:.2f}x" if rule == "straggler" else \
        f"{share.low:.0%}-{share.high:.0%}"
    limit = f"{threshold:.2f}x" if rule == "straggler" else f"{threshold:.0%}"
    return (f"{what} spans {shown} over steps and ranks, across the {limit} threshold: no "
            "verdict from this run; more steps (max_steps) or a quieter host narrow it")


def _doctor_command(p: dict, ranks: int) -> str:
    """`doctor --health` over the run's layout: its nodes, the ranks of each; inside a
    Slurm job for a run launched with srun."""
    nnodes = int(p.get("nnodes") or 1)
    command = f"python -m benchlib doctor --health --nproc {max(1, ranks // nnodes)}"
    if p.get("launcher") == "srun":
        return f"`{command} --launcher srun --nnodes {nnodes}` inside a job of its nodes"
    return f"`{command}{f' --nnodes {nnodes}' if nnodes > 1 else ''}`"


def column(record: dict[str, Any]) -> str:
    """The bottleneck as the report's run tables show it ("" where none applies)."""
    study = record.get("study")  # a GPU check's step, or a study that trains a model
    if record.get("status") != "ok" or not (study == GPU_CHECK or study and studies.trains(study)):
        return ""
    m = record.get("metrics") or {}
    if m.get("data_s") is None and m.get("compute_s") is None:
        return ""
    return diagnose(record).bottleneck


def why_not(record: dict[str, Any]) -> str:
    """Why an ok record gets no bottleneck (`column` gives "")."""
    return (record.get("metrics") or {}).get("steps_not_judged") or \
        f"not a training run with step times ({record.get('study')})"


__all__ = ["BOTTLENECKS", "STARTUP_GAP", "Diagnosis", "column", "diagnose", "shares", "why_not"]
