"""What holds a run back, and which measured change helps (`python -m benchlib diagnose`, a
column of the report's run tables).

A training record carries the evidence: each step's data wait and compute time, each
rank's mean step (a straggler), DDP's all-reduce per step and the part of it backward
does not hide (benchlib.distributed.comm_timer), CUDA's allocation retries and OOMs, and
how busy the host was at the start; where the run left Kineto traces (`export_trace`),
Holistic Trace Analysis' breakdowns of them on a CUDA run (benchlib.diagnose.traces).
The bottleneck is the first of these rules that holds:

  straggler             one rank's own work a step >= STRAGGLER x the other ranks' median,
                        its extra time >= STRAGGLER_SHARE of a step
  input-bound           >= INPUT_SHARE of each step waits for data
  communication-bound   >= COMM_SHARE of each step is all-reduce nothing hides
  memory-bound          the allocator retried (freed its cache to find room) or ran out
  host-contended        at the start, the host's 1-minute load exceeded its cores or other
                        tasks were running on every core (benchlib.core.hostload)
  launch-bound          a CUDA step shorter than LAUNCH_S: kernels too small to fill the GPU
  compute-bound         >= COMPUTE_SHARE of each step computes
  no single bottleneck  none of the above

A run on a busy host carries that caveat whatever its bottleneck. The advice names the
change and, where records of the same testbed measured it, the measured ratio; else the
row to run to find out (`diagnose --try` runs it and reports the change with an interval):
more DataLoader workers, a doubled batch, amp_bf16, or for a straggler that is the last
rank of one node, one rank fewer (the slow one left out).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from benchlib.core import hostload
from benchlib.diagnose import compile_advice, traces

STRAGGLER = 1.25  # a rank this many times the other ranks' median
STRAGGLER_SHARE = 0.20  # and its extra time at least this share of a step (not noise)
INPUT_SHARE = 0.30
COMM_SHARE = 0.30
COMPUTE_SHARE = 0.70
LAUNCH_S = 0.002  # 2 ms: below this a CUDA step is mostly launch overhead
TRAINING_STUDIES = ("dp_vs_ddp", "multinode_lightning", "framework_comparison",
                    "transformer_training", "single_device_io", "gpu_check")
BOTTLENECKS = ("straggler", "input-bound", "communication-bound", "memory-bound",
            "host-contended", "launch-bound", "compute-bound", "no single bottleneck")


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


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def rank_steps(record: dict[str, Any]) -> list[float]:
    """Each rank's own work per step: its mean step (the median over the record's epochs),
    less the all-reduce time nothing hid on that rank. In synchronous DDP every rank's step
    lasts as long as the slowest's, the fast ones waiting inside the all-reduce: without
    that wait taken out, a straggler would not show."""
    epochs = [e.get("rank_step_s") for e in (record.get("details") or {}).get("epochs", [])]
    epochs = [e for e in epochs if isinstance(e, list) and e]
    if not epochs:
        return []
    steps = [statistics.median(e[r] for e in epochs if r < len(e)) for r in range(len(epochs[0]))]
    waits = (record.get("details") or {}).get("rank_comm_exposed_s")
    if isinstance(waits, list) and len(waits) == len(steps) and None not in waits:
        steps = [max(s - w, 0.0) for s, w in zip(steps, waits)]
    return steps


def shares(m: dict[str, Any]) -> dict[str, float | None]:
    """data, compute and exposed communication as shares of a step (rank 0's)."""
    data, compute = m.get("data_s"), m.get("compute_s")
    if data is None or compute is None or data + compute <= 0:
        return {"data": None, "compute": None, "comm": None}
    step = data + compute
    exposed = m.get("comm_exposed_s")  # inside compute_s: the step's wait for the all-reduce
    own = compute - (exposed or 0.0)
    return {"data": data / step, "compute": max(own, 0.0) / step,
            "comm": exposed / step if exposed is not None else None}


def diagnose(record: dict[str, Any], same_testbed: pd.DataFrame | None = None) -> Diagnosis:
    """The bottleneck of one record, its evidence lines and the advice (measured where
    `same_testbed`, a frame of this testbed's records, holds the change)."""
    m, p = record.get("metrics") or {}, record.get("params") or {}
    d = Diagnosis(record.get("run_id", "?"), "no single bottleneck")
    part = shares(m)
    steps = rank_steps(record)
    load = (record.get("host_load") or {}).get("start") or {}
    busy = bool((record.get("host_load") or {}).get("busy"))
    if part["data"] is not None:
        d.evidence.append(f"each step: {part['data']:.0%} waiting for data, "
                          f"{part['compute']:.0%} computing (data {m['data_s'] * 1e3:.1f} ms, "
                          f"compute {m['compute_s'] * 1e3:.1f} ms, rank 0)")
    if m.get("comm_s") is not None:
        hidden = m.get("comm_hidden_fraction")
        d.evidence.append(f"all-reduce {m['comm_s'] * 1e3:.1f} ms a step, "
                          f"{m['comm_exposed_s'] * 1e3:.1f} ms of it not hidden by backward"
                          + (f" ({hidden:.0%} hidden)" if hidden is not None else ""))
    trace_dir = (record.get("details") or {}).get("trace_dir")
    if trace_dir:  # HTA's view of the same steps, where it can see them
        d.evidence += traces.evidence(trace_dir)
    skew, extra = None, 0.0
    if len(steps) > 1:
        slowest = max(range(len(steps)), key=steps.__getitem__)
        others = statistics.median(s for r, s in enumerate(steps) if r != slowest)
        # the others did nothing of their own (all waiting): any work of the slowest's stands out
        skew = steps[slowest] / others if others > 0 else (float("inf") if steps[slowest] else 1.0)
        step = (m.get("data_s") or 0) + (m.get("compute_s") or 0)
        extra = (steps[slowest] - others) / step if step > 0 else 0.0
        d.evidence.append(f"each rank's own work a step: "
                          f"{', '.join(f'{s * 1e3:.0f}' for s in steps)} ms; the slowest (rank "
                          f"{slowest}) {skew:.2f}x the others' median")
    if m.get("alloc_retries") is not None:
        d.evidence.append(f"CUDA allocator: {m['alloc_retries']} retries, {m.get('ooms')} OOMs, "
                          f"peak reserved {m.get('peak_reserved_bytes', 0) / 2**30:.1f} GiB")
    if load:
        d.evidence.append(f"host at start: {hostload.figures(load)}")
    if busy:
        d.caveat = ("the host was busy when the run started: every figure includes the "
                    "contention; rerun on a quiet host before acting on it")

    if skew is not None and skew >= STRAGGLER and extra >= STRAGGLER_SHARE:
        d.bottleneck = "straggler"
        nproc = len(steps)
        d.advice = (f"rank {slowest} is {skew:.2f}x the other ranks: find the slow device or "
                    f"node with {_doctor_command(p, nproc)}, then leave it out or fix it")
        # one node whose last rank is the slow one: fewer ranks per node leave exactly it out
        if p.get("nproc_per_node") == nproc and slowest == nproc - 1 and nproc > 1:
            d.try_params = {"nproc_per_node": nproc - 1}
    elif part["data"] is not None and part["data"] >= INPUT_SHARE:
        d.bottleneck = "input-bound"
        d.advice, d.try_params = _input_advice(p, same_testbed)
    elif part["comm"] is not None and part["comm"] >= COMM_SHARE:
        d.bottleneck = "communication-bound"
        d.advice = (f"{part['comm']:.0%} of each step is all-reduce backward does not hide: a "
                    "larger batch per device (fewer all-reduces per sample), FSDP2 or gradient "
                    "compression; check the link with `python -m benchlib allreduce`")
        batch = p.get("batch_size")
        if batch:
            d.try_params = {"batch_size": 2 * int(batch)}
    elif (m.get("alloc_retries") or 0) > 0 or (m.get("ooms") or 0) > 0:
        d.bottleneck = "memory-bound"
        d.advice = (f"the allocator retried {m.get('alloc_retries')} times: the batch is near "
                    f"the memory's edge; `python -m benchlib maxbatch --model {p.get('model')}` "
                    "finds the largest that trains, activation checkpointing (notebook 50) "
                    "trades compute for memory")
    elif busy:
        d.bottleneck = "host-contended"
        d.advice = "rerun on a quiet host (or a node of its own: sbatch --exclusive)"
    elif m.get("device_type") == "cuda" and m.get("batch_s") is not None \
            and m["batch_s"] < LAUNCH_S:
        d.bottleneck = "launch-bound"
        d.advice = (f"a step takes {m['batch_s'] * 1e3:.2f} ms: too little work per kernel "
                    "launch; a larger batch, or torch.compile (fewer, fused kernels)")
    elif part["compute"] is not None and part["compute"] >= COMPUTE_SHARE:
        d.bottleneck = "compute-bound"
        d.advice, d.try_params = _compute_advice(m, p, same_testbed)
        d.advice += compile_advice.sentence(record, same_testbed)  # measured, or its command
    return d


def _doctor_command(p: dict, ranks: int) -> str:
    """`doctor --health` over the run's layout: its nodes, the ranks of each; inside a
    Slurm job for a run launched with srun."""
    nnodes = int(p.get("nnodes") or 1)
    command = f"python -m benchlib doctor --health --nproc {max(1, ranks // nnodes)}"
    if p.get("launcher") == "srun":
        return f"`{command} --launcher srun --nnodes {nnodes}` inside a job of its nodes"
    return f"`{command}{f' --nnodes {nnodes}' if nnodes > 1 else ''}`"


def _input_advice(p: dict[str, Any], same: pd.DataFrame | None) -> tuple[str, dict[str, Any]]:
    """More DataLoader workers: the best this testbed measured in the IO study, else the
    row to run."""
    workers = int(p.get("num_workers") or 0)
    wanted = max(4, 2 * workers)
    measured = ""
    if same is not None and not same.empty and "num_workers" in same:
        io = same[(same.get("study") == "single_device_io") & (same["status"] == "ok")
                  & same["samples_per_s"].notna()]
        base = io[io["num_workers"] == workers]
        more = io[io["num_workers"] > workers]
        if not base.empty and not more.empty:
            best = more.loc[more["samples_per_s"].idxmax()]
            ratio = best["samples_per_s"] / base["samples_per_s"].median()
            wanted = int(best["num_workers"])
            measured = (f"; on this testbed num_workers={wanted} measured {ratio:.1f}x "
                        f"num_workers={workers}'s samples/s (run {best['run_id']})")
    advice = (f"more DataLoader workers (now {workers}){measured}: "
              f"`python -m benchlib run 10_single_device_io -p num_workers {wanted}`")
    return advice, {"num_workers": wanted}


def _compute_advice(m: dict[str, Any], p: dict[str, Any],
                    same: pd.DataFrame | None) -> tuple[str, dict[str, Any]]:
    """Less arithmetic per step or faster arithmetic: bf16 (where fp32 ran), measured on
    this testbed by notebook 40 when it has both."""
    precision = p.get("precision", "fp32")
    if precision != "fp32":
        return ("the device is busy computing: fewer FLOPs per sample (a smaller model or "
                "input) or more devices; `torch.compile` fuses what remains", {})
    measured = ""
    if same is not None and not same.empty and "precision" in same:
        fw = same[(same.get("study") == "framework_comparison") & (same["status"] == "ok")]
        if not fw.empty:
            fp32 = fw[fw["precision"] == "fp32"]["samples_per_s"].median()
            bf16 = fw[fw["precision"] == "amp_bf16"]["samples_per_s"].median()
            if pd.notna(fp32) and pd.notna(bf16) and fp32 > 0:
                measured = f"; on this testbed amp_bf16 measured {bf16 / fp32:.2f}x fp32 (notebook 40)"
    on = "GPU" if m.get("device_type") == "cuda" else "CPU"
    return (f"the {on} computes most of each step: mixed precision (precision amp_bf16){measured}",
            {"precision": "amp_bf16"})


def column(record: dict[str, Any]) -> str:
    """The bottleneck as the report's run tables show it ("" for a record it does not apply to)."""
    if record.get("status") != "ok" or record.get("study") not in TRAINING_STUDIES:
        return ""
    m = record.get("metrics") or {}
    if m.get("data_s") is None and m.get("compute_s") is None:
        return ""
    return diagnose(record).bottleneck
