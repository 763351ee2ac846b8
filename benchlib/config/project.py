"""`benchlib project`'s parameters (docs/projection.md): the projection's inputs as given
on its command line, and how often to checkpoint (`--mtbf`). Its flags are generated
from these (benchlib.config.flags), as the workers' are from theirs.

An input left out is None, not a default: the projection says which one it misses and
how to give it (benchlib.projection.scaling's HOW), and a default that would stand in
for a measurement would hide that. So nothing here checks more than a flag's type and
choices; the command checks the rest (benchlib.cli.project). Notebook 45's parameters
are ScalingProjectionConfig's, where an input may also be a run id, `newest` or
`dlperf`; the fields both have keep the same names (batch_size, model,
devices_per_node, nodes, host_cores, input_ceiling, intra_busbw, inter_busbw)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig

PROJECT_CHECKS = ("dlperf", "torchtitan")
# ddp: gradient all-reduce; dp: ddp capped by one process per node; fsdp2: parameter
# all-gathers and gradient reduce-scatter (benchlib.projection.scaling.STRATEGIES, and dp)
PROJECT_STRATEGIES = ("ddp", "dp", "fsdp2")


@dataclasses.dataclass
class ProjectConfig(StudyConfig):
    """The projection's inputs: one device's speed, the model's size, the links, the
    layout and the what-ifs; or one of the checks against published rows."""

    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"check": PROJECT_CHECKS,
                                                     "strategy": PROJECT_STRATEGIES}
    metavars: ClassVar[dict[str, str]] = {"what_if": "NAME=VALUE|NAME=Nx",
                                          "source": "INPUT=TEXT"}

    check_dlperf: bool = False
    """Fit 1-node rows, predict 16/32-GPU rows: seed 003 in-sample and
    leave-one-framework-out, DLPerf's pages out-of-sample, beside a naive baseline."""
    check: str | None = None
    """dlperf: as --check-dlperf; torchtitan: fsdp2 from torchtitan's 8-GPU Llama 3.1 8B
    rows to its 128-GPU rows."""
    samples_per_s: float | None = None
    """One device's training samples/s."""
    step_s: float | None = None
    """Or one device's step time (s)."""
    tokens_per_s: float | None = None
    """Or one device's training tokens/s (with --seq-len; --batch-size in sequences)."""
    mfu: float | None = None
    """Or its compute as MFU (0-1) of --peak-tflops, over --flops-per-token."""
    peak_tflops: float | None = None
    """The device's dense peak TFLOP/s."""
    flops_per_token: float | None = None
    """Training FLOPs per token (default: 6 params + 12 layers d_model seq_len, PaLM
    appendix B)."""
    batch_size: int | None = None
    """Per device."""
    model: str | None = None
    """Parameter count from: resnet18, resnet34, resnet50, resnet101, vgg16, vit_b_16,
    mobilenet_v2."""
    params: float | None = None
    """Or the parameter count."""
    layers: int | None = None
    """A language model's blocks (FLOPs; fsdp2's units)."""
    d_model: int | None = None
    """A language model's hidden size (FLOPs)."""
    seq_len: int | None = None
    """A language model's tokens per sequence."""
    grad_bytes: float | None = None
    """Or the gradient size in bytes."""
    reduce_bytes: float | None = None
    """Bytes per gradient element all-reduced or reduce-scattered (default 4: fp32)."""
    param_bytes: float | None = None
    """fsdp2: bytes per parameter all-gathered (default 2: bf16)."""
    bucket_mb: float | None = None
    """All-reduce bucket in MiB (default 25: DDP's bucket_cap_mb)."""
    overlap: float | None = None
    """Share of the all-reduce backward hides (default 0)."""
    intra_busbw: float | None = None
    """GB/s among a node's devices."""
    inter_busbw: float | None = None
    """GB/s between nodes."""
    input_ceiling: str | None = None
    """Samples/s the data path of one node delivers, or none."""
    devices_per_node: int | None = None
    """Devices (or CPU ranks) per node, 1 to 1024."""
    nodes: str | None = None
    """Comma-separated node counts, each 1 to 1024 (default: up to 1024 devices)."""
    strategy: str = "ddp"
    """ddp: gradient all-reduce; dp: ddp capped by one process per node; fsdp2: parameter
    all-gathers and gradient reduce-scatter."""
    single_process_limit: float | None = None
    """dp: samples/s of one process per node."""
    host_cores: float | None = None
    """CPU ranks: the cores free for one node's ranks (may be a fraction)."""
    compute_threads: int | None = None
    """CPU ranks: the threads the one-device figure was measured with."""
    what_if: list[str] = dataclasses.field(default_factory=list)
    """Repeatable; NAME one of inter_bw, intra_bw, input_ceiling, batch_size, compute,
    overlap, bucket_mb, host_cores."""
    source: list[str] = dataclasses.field(default_factory=list)
    """Where an input came from (a run id, a data sheet); repeatable."""


@dataclasses.dataclass
class CheckpointPlanConfig(StudyConfig):
    """How often to checkpoint (`--mtbf`): Daly's interval and the exact goodput from a
    save's cost, given or read from a record that measured it (benchlib.core.goodput)."""

    metavars: ClassVar[dict[str, str]] = {"checkpoint_run": "RUN_ID|newest"}

    mtbf: str | None = None
    """The cluster's mean time between failures (12h, 30m, 2d): print Daly's interval and
    the exact goodput at it (exponential failures)."""
    checkpoint_run: str | None = None
    """The record C, R, D and the run's own interval are read from: its median blocking
    seconds a save (or what its rate lost a save, where more), its recovery per restart,
    an asynchronous save's time to durable, checkpoint_every x step_s."""
    checkpoint_s: float | None = None
    """Or C: seconds of training a save costs."""
    durable_s: float | None = None
    """D: seconds from resuming training until an asynchronous save is durable (default:
    the record's, else 0)."""
    restart_s: float | None = None
    """R: seconds from a failure back to training (default: the record's recovery, else
    0)."""
    interval_s: float | None = None
    """A run's own seconds between saves, to compare (default: the record's)."""
