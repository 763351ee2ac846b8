"""What holds a run back, and which measured change helps (`python -m benchlib diagnose`, a
column of the report's run tables).

A training record carries the evidence: the start-up beside the steady rate (the first
batch's wait, the whole-epoch rate), each share of a step (waiting for data, DDP's
all-reduce nothing hid, the rank's own compute, split into forward and backward) and the
slowest rank's skew over the others, each with its spread over steps and ranks
(benchlib.core.throughput), CUDA's allocation retries and OOMs, and the other tasks that
shared the job's cores during the timed steps; where the run left Kineto traces
(`export_trace`), Holistic Trace Analysis' breakdowns of them on a CUDA run
(benchlib.diagnose.traces). The figures with their spread are benchlib.diagnose.figures',
the lines that show them benchlib.diagnose.evidence's. The bottleneck is the first of
these rules that holds:

  host-contended        during the timed steps, other tasks ran on the job's cores
                        (hostload.CONTENDED a core, on average; borderline from
                        hostload.BORDERLINE); a record older than that count: at the start,
                        the 1-minute load exceeded the cores or other tasks ran on every
                        core. Named before any other cause, whose figures include the
                        contention; what the figures alone read is the second line, and
                        its advice (and `--try`'s change) is given beside "rerun on a quiet
                        host"
  start-up-bound        the steady rate is more than STARTUP_GAP x the whole-epoch rate
                        (of a whole epoch of the data set, projected where max_steps cut it)
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

A share (or the skew, the start-up gap over epochs, the stall share over saves, a CUDA
step over epochs, the contention) holds its rule when its whole spread is on the rule's
side of the threshold; where the spread straddles it the verdict is "borderline: X or Y"
(Y what the rules after it give), never X alone. Where a run's communication is unknown
(FSDP2, Lightning, DDP without the comm hook) no communication verdict is drawn, and a
compute share that would hold is "borderline: compute-bound or communication-bound". The thresholds' basis and the
cases built to check them are in docs/diagnose.md. The advice (benchlib.diagnose.advice)
quotes what records of the same work measured, else the command that measures it; for
checkpoint stalls, an asynchronous save or Young/Daly's interval (`benchlib project --mtbf`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from benchlib import studies
from benchlib.config.studies import GPU_CHECK
from benchlib.core import hostload
from benchlib.core.stats import STARTUP_GAP
from benchlib.core.throughput import startup_text
from benchlib.diagnose import advice, compile_advice, evidence, pipeline
from benchlib.diagnose.figures import (
    FAILS,
    HOLDS,
    STRADDLES,
    Share,
    contention,
    cuda_step,
    rank_steps,
    shares,
    skew_of,
    stall_share,
    startup_gap,
)

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
QUIET = "rerun on a quiet host (or a node of its own: sbatch --exclusive)"


@dataclass
class Diagnosis:
    run_id: str
    bottleneck: str
    evidence: list[str] = field(default_factory=list)
    advice: str = ""
    caveat: str = ""
    try_params: dict[str, Any] = field(default_factory=dict)  # the change `--try` runs
    figures: str = ""  # what the figures alone read, where the host was shared

    def text(self) -> str:
        lines = [f"{self.run_id}: {self.bottleneck}"]
        if self.figures:
            lines.append(f"  its figures alone: {self.figures}")
        lines += [f"  {e}" for e in self.evidence]
        if self.advice:
            lines.append(f"  advice: {self.advice}")
        if self.caveat:
            lines.append(f"  caveat: {self.caveat}")
        return "\n".join(lines)


def _rules(record: dict[str, Any], part: dict[str, Share | None], skewed) -> list[tuple]:
    """(bottleneck, state, its borderline partner or None) of each rule, in order."""
    m = record.get("metrics") or {}
    unknown = bool(m.get("comm_unknown"))

    def by(share: Share | None, threshold: float, **how) -> str:
        return FAILS if share is None else share.state(threshold, **how)

    straggler = FAILS
    if skewed is not None and skewed[2] >= STRAGGLER_SHARE:
        straggler = skewed[1].state(STRAGGLER)
    gap = startup_gap(m)
    startup = by(gap, STARTUP_GAP, strict=True) if gap is not None else \
        HOLDS if m.get("startup_hidden") else FAILS
    compute = by(part["compute"], COMPUTE_SHARE)
    return [
        ("host-contended", contention(record)[0], None),
        ("start-up-bound", startup, None),
        ("straggler", straggler, None),
        ("input-bound", FAILS if m.get("window_prefetched_only")
         else by(part["data"], INPUT_SHARE), None),
        ("communication-bound", FAILS if unknown else by(part["comm"], COMM_SHARE), None),
        ("memory-bound", HOLDS if (m.get("alloc_retries") or 0) > 0 or (m.get("ooms") or 0) > 0
         else FAILS, None),
        ("checkpoint-stalled", by(stall_share(m), CHECKPOINT_SHARE, strict=True), None),
        ("launch-bound", by(cuda_step(record), LAUNCH_S, above=False), None),
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
    `same_testbed`, a frame of this testbed's records, holds the same work changed). Where
    the host was shared (or may have been: borderline), what the figures alone read is a
    line of its own, and its advice and change stand beside rerunning on a quiet host."""
    m = record.get("metrics") or {}
    part, skewed = shares(m), skew_of(record)
    rules = _rules(record, part, skewed)
    bottleneck, rule = first_bottleneck(rules)
    d = Diagnosis(record.get("run_id", "?"), bottleneck,
                  evidence.lines(record, part, skewed, contention(record)[1]))
    if rule == "host-contended":
        d.figures, figures_rule = first_bottleneck(rules[1:])
        said, d.try_params = _advice(record, d.figures, figures_rule, part, skewed, same_testbed)
        why = _borderline_advice(rule, record, part, skewed) + "; " \
            if bottleneck.startswith("borderline") else ""
        d.advice = (f"{why}{QUIET}: its figures include the contention; for what they alone "
                    f"read ({d.figures}): {said or 'nothing to change'}")
    else:
        d.advice, d.try_params = _advice(record, bottleneck, rule, part, skewed, same_testbed)
    hidden = startup_text(m)
    if hidden and rule != "start-up-bound":
        d.caveat = hidden
    return d


def _advice(record: dict[str, Any], bottleneck: str, rule: str, part: dict, skewed,
            same: pd.DataFrame | None) -> tuple[str, dict[str, Any]]:
    """(advice, the change `--try` runs) for `bottleneck`, from the rule it came from."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    if bottleneck.startswith("borderline"):
        return _borderline_advice(rule, record, part, skewed), {}
    if rule == "start-up-bound":
        return advice.startup_advice(record), {}
    if rule == "straggler":
        slowest, skew, _ = skewed
        nproc = len(rank_steps(record))
        said = (f"rank {slowest} is {skew.value:.2f}x the other ranks: find the slow device "
                f"or node with {_doctor_command(p, nproc)}, then leave it out or fix it")
        # one node whose last rank is the slow one: fewer ranks per node leave exactly it out
        if p.get("nproc_per_node") == nproc and slowest == nproc - 1 and nproc > 1:
            return said, {"nproc_per_node": nproc - 1}
        return said, {}
    if rule == "input-bound":  # a shard row's waits are the store's, the link's or a worker's
        return (pipeline if m.get("shard_format") else advice).input_advice(record, same)
    if rule == "communication-bound":
        return advice.comm_advice(record, part["comm"].value, same)
    if rule == "memory-bound":
        return (f"the allocator retried {m.get('alloc_retries')} times: the batch is near "
                f"the memory's edge; `python -m benchlib maxbatch --model {p.get('model')}` "
                "finds the largest that trains, activation checkpointing (notebook 50) "
                "trades compute for memory"), {}
    if rule == "checkpoint-stalled":
        return advice.checkpoint_advice(m, p, record.get("run_id", "RUN"))
    if rule == "launch-bound":
        return (f"a step takes {m['batch_s'] * 1e3:.2f} ms: too little work per kernel "
                "launch; a larger batch, or torch.compile (fewer, fused kernels)"), {}
    if rule == "compute-bound":
        said, change = advice.compute_advice(record, same)
        return said + compile_advice.sentence(record, same), change  # measured, or its command
    return "", {}


def _spans(what: str, shown: str, over: str, limit: str) -> str:
    return (f"{what} spans {shown} {over}, across the {limit} threshold: no verdict from this "
            "run")


def _borderline_advice(rule: str, record: dict[str, Any], part: dict, skewed) -> str:
    """Why no verdict: the figure whose spread straddles its threshold, and what narrows it."""
    m = record.get("metrics") or {}
    if rule == "compute-bound" and m.get("comm_unknown"):
        return (f"{m['comm_unknown']}, so computing and communicating are not told apart "
                f"({part['compute'].pct()} of a step is both)")
    if rule == "host-contended":
        cores = m.get("host_cores") or 1
        return (f"other tasks ran on the job's {cores} cores during the timed steps, "
                f"{m.get('host_others_running', 0) / cores:.2f} a core on average: from "
                f"{hostload.BORDERLINE:.2f} a core the figures may include them, from "
                f"{hostload.CONTENDED:.2f} they do")
    more = "; more steps (max_steps) or a quieter host narrow it"
    if rule == "start-up-bound":
        gap = startup_gap(m)
        return _spans("the start-up gap", f"{gap.low:.1f}-{gap.high:.1f}x", f"over {gap.n} "
                      "epochs", f"{STARTUP_GAP:.1f}x") + "; more epochs (or launches) narrow it"
    if rule == "checkpoint-stalled":
        stall = stall_share(m)
        return _spans("the checkpoint stall share", f"{stall.low:.1%}-{stall.high:.1%}",
                      f"at the p10-p90 of a save's stall ({stall.n} saves)",
                      f"{CHECKPOINT_SHARE:.0%}") + "; more saves narrow it"
    if rule == "launch-bound":
        step = cuda_step(record)
        return _spans("a CUDA step", f"{step.low * 1e3:.2f}-{step.high * 1e3:.2f} ms",
                      f"over {step.n} epochs", f"{LAUNCH_S * 1e3:g} ms") + more
    if rule == "straggler":
        skew = skewed[1]
        return _spans("the slowest rank's skew", f"{skew.low:.2f}-{skew.high:.2f}x",
                      "over steps and ranks", f"{STRAGGLER:.2f}x") + more
    share, threshold, what = {
        "input-bound": (part["data"], INPUT_SHARE, "the data share"),
        "communication-bound": (part["comm"], COMM_SHARE, "the all-reduce share"),
        "compute-bound": (part["compute"], COMPUTE_SHARE, "the compute share"),
    }[rule]
    return _spans(what, f"{share.low:.0%}-{share.high:.0%}", "over steps and ranks",
                  f"{threshold:.0%}") + more


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


__all__ = ["BOTTLENECKS", "FAILS", "HOLDS", "STARTUP_GAP", "STRADDLES", "Diagnosis", "column",
           "diagnose", "shares", "why_not"]
