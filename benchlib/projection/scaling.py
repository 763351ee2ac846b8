"""Scaling projection: throughput on N devices x M nodes from what one node measured.

One step (docs/projection.md): compute_s of one device (notebook 40 or 20), plus the part
of the gradient all-reduce backward does not hide: a ring costs 2(n-1)/n x grad_bytes /
busbw at each level (a node's devices over intra_busbw_gbps, nodes over inter_busbw_gbps),
of which `overlap` may hide, except the last bucket and never more than the backward pass.
A node's data path (input_ceiling, samples/s: the IO study) and, for DataParallel, its one
process (single_process_limit) cap it:
    step_s = max(compute_s + comm_s, node samples / input_ceiling, node samples / single limit)
CPU ranks share their host's cores (host_cores): one rank's compute_s grows as its share of
the cores shrinks below the threads it was measured with, compute_s x compute_threads /
min(compute_threads, host_cores / ranks on the host), so ranks beyond the cores add no
compute, only all-reduce.
FSDP2 (strategy "fsdp2", fully_shard per block, ZeRO-3): instead of the all-reduce, each rank
all-gathers the parameters in forward and again in backward and reduce-scatters the
gradients, each a ring of (n-1)/n x bytes / busbw over all n ranks at the slowest link they
cross (fsdp_comm_s).
Pure (numpy/pandas). A missing input raises UsageError saying how to measure or give it;
nothing is filled in silently.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import pandas as pd

from benchlib.config.choices import PROJECTION_MAX_DEVICES_PER_NODE as MAX_DEVICES_PER_NODE
from benchlib.config.choices import PROJECTION_MAX_NODES as MAX_NODES
from benchlib.errors import UsageError

DEFAULT_MAX_DEVICES = 1024  # the default sizes go up to this many devices
BACKWARD_SHARE = 2 / 3  # backward ~ 2x the forward FLOPs: at most this share of compute_s hides comm
STRATEGIES = ("ddp", "fsdp2")  # dp is ddp capped by single_process_limit
DEFAULT_BUCKET_MB = 25.0  # torch DistributedDataParallel's bucket_cap_mb default
# Parameters of torchvision models (1000 classes): sum of p.numel(), counted with torchvision 0.29.1.
MODEL_PARAMS = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
                "resnet101": 44_549_160, "vgg16": 138_357_544, "vit_b_16": 86_567_656,
                "mobilenet_v2": 3_504_872}


def ring_allgather_s(nbytes: float, ranks: int, busbw_gbps: float | None) -> float:
    """Seconds a ring all-gather (or reduce-scatter) of `nbytes` in all over `ranks` takes:
    (n-1)/n x bytes / busbw (nccl-tests' busbw for both)."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) / ranks * nbytes / (busbw_gbps * 1e9)


def flops_per_token(params: float, layers: int, d_model: int, seq_len: int) -> float:
    """Training FLOPs per token of a decoder-only transformer, PaLM (Chowdhery et al. 2022)
    appendix B: 6N + 12 L H Q T, N parameters, L layers, H heads of Q dims (H Q = d_model),
    T tokens per sequence: the matmuls' 6 per parameter plus attention's scores and values."""
    return 6 * params + 12 * layers * d_model * seq_len


def ring_allreduce_s(nbytes: float, ranks: int, busbw_gbps: float | None) -> float:
    """Seconds a ring all-reduce of `nbytes` over `ranks` takes: 2(n-1)/n x bytes / busbw."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * nbytes / (busbw_gbps * 1e9)


@dataclasses.dataclass(frozen=True)
class Inputs:
    """Every term of the model; `sources` says where each value came from."""

    compute_s: float  # one device's step time at batch_size
    batch_size: int  # per device
    grad_bytes: float
    devices_per_node: int
    input_ceiling: float | None  # samples/s per node; math.inf: declared unlimited
    intra_busbw_gbps: float | None = None
    inter_busbw_gbps: float | None = None
    overlap: float = 0.0  # share of the all-reduce backward may hide (0: none)
    bucket_bytes: float = DEFAULT_BUCKET_MB * 2**20
    single_process_limit: float | None = None  # samples/s per node, DataParallel only
    host_cores: float | None = None  # CPU ranks: cores free for one node's ranks (None: devices)
    compute_threads: int | None = None  # CPU ranks: the threads compute_s was measured with
    strategy: str = "ddp"  # ddp: all-reduce of grad_bytes; fsdp2: all-gathers and a reduce-scatter
    gather_bytes: float | None = None  # fsdp2: parameter bytes all-gathered per pass (param dtype)
    layers: int | None = None  # fsdp2: blocks, each its own fully_shard unit (None: one unit)
    seq_len: int | None = None  # language models: tokens per sample, for tokens/s
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _positive(name: str, value, how: str) -> None:
    if value is None:
        raise UsageError(f"{name}: missing; {how}")
    if not value > 0:
        raise UsageError(f"{name}: must be > 0, got {value}; {how}")


def _between(name: str, value: int, most: int) -> None:
    if not 1 <= value <= most:
        raise UsageError(f"{name}: must be between 1 and {most}, got {value}")


HOW = {
    "compute_s": "give --samples-per-s of one device (notebook 40 or 20) or --step-s",
    "batch_size": "give --batch-size, the per-device batch the compute figure was measured at",
    "grad_bytes": "give --model with a known parameter count or --grad-bytes (parameters x 4 "
                  "for fp32 gradients)",
    "grad_bytes_unknown": "measure it: --grad-bytes 4 x sum(p.numel() for p in "
                          "model.parameters()) for fp32, or 4 x the model_params of the "
                          "model's one-device record (notebook 40)",
    "devices_per_node": "give --devices-per-node",
    "input_ceiling": "measure the data path's samples/s on one node with the IO study "
                     "(notebook 10) and give --input-ceiling, or --input-ceiling none for "
                     "synthetic data",
    "intra_busbw_gbps": "measure busbw_gbps with the all-reduce study on one node "
                        "(benchlib allreduce) or give --intra-busbw from the data sheet",
    "inter_busbw_gbps": "measure busbw_gbps with the all-reduce study across two nodes "
                        "or give --inter-busbw (e.g. 10 for one 100 Gb/s link)",
    "single_process_limit": "DataParallel needs --single-process-limit: the samples/s of "
                            "the dp rows of notebook 20 on a full node",
    "gather_bytes": "fsdp2 all-gathers the parameters: give --params N (or --model NAME) "
                    "and --param-bytes (2 for bf16, the default)",
    "host_cores": "give --host-cores, the cores one node's CPU ranks share (nproc)",
    "compute_threads": "CPU ranks sharing --host-cores need --compute-threads: the "
                       "threads_per_rank of the one-device record compute_s came from",
}


def validate(inp: Inputs, sizes: Sequence[tuple[int, int]]) -> None:
    """Raise UsageError for the first missing or out-of-range input these sizes need."""
    for name in ("compute_s", "batch_size", "grad_bytes", "devices_per_node", "input_ceiling"):
        _positive(name, getattr(inp, name), HOW[name])
    _between("devices_per_node", inp.devices_per_node, MAX_DEVICES_PER_NODE)
    if any(devices > nodes for devices, nodes in sizes):
        _positive("intra_busbw_gbps", inp.intra_busbw_gbps, HOW["intra_busbw_gbps"])
    if any(nodes > 1 for _, nodes in sizes):
        _positive("inter_busbw_gbps", inp.inter_busbw_gbps, HOW["inter_busbw_gbps"])
    if inp.single_process_limit is not None:
        _positive("single_process_limit", inp.single_process_limit, HOW["single_process_limit"])
    if inp.strategy not in STRATEGIES:
        raise UsageError(f"strategy: {inp.strategy!r} is not one of {', '.join(STRATEGIES)}")
    if inp.strategy == "fsdp2":
        _positive("gather_bytes", inp.gather_bytes, HOW["gather_bytes"])
        if inp.layers is not None:
            _positive("layers", inp.layers, "give --layers, the model's blocks")
    if not 0 <= inp.overlap <= 1:
        raise UsageError(f"overlap: must be between 0 and 1, got {inp.overlap}")
    _positive("bucket_bytes", inp.bucket_bytes, "give --bucket-mb (DDP's bucket_cap_mb)")
    if inp.host_cores is not None or inp.compute_threads is not None:
        _positive("host_cores", inp.host_cores, HOW["host_cores"])
        _positive("compute_threads", inp.compute_threads, HOW["compute_threads"])
    for devices, nodes in sizes:
        _between("nodes", nodes, MAX_NODES)
        if devices % nodes or devices // nodes > inp.devices_per_node:
            raise UsageError(f"devices: {devices} on {nodes} nodes of {inp.devices_per_node} "
                             "devices each do not fit; give whole nodes")


def fsdp_comm_s(inp: Inputs, per_node: int, nodes: int) -> float:
    """FSDP2's collectives that compute does not hide. Per step, over all n ranks in one
    ring (NCCL's flat ring: HSDP is not modelled), at the slowest link the ring crosses
    (intra_busbw within a node, min(intra, inter) across nodes): the parameters all-gathered
    in forward and again in backward (gather_bytes each) and the gradients reduce-scattered
    (grad_bytes). Prefetch hides them behind compute, forward and backward alike, by
    `overlap`, except the first block's forward all-gather, and never more than compute_s."""
    ranks = per_node * nodes
    busbw = inp.intra_busbw_gbps if nodes == 1 else min(
        inp.inter_busbw_gbps, inp.intra_busbw_gbps or math.inf)
    gather = ring_allgather_s(inp.gather_bytes, ranks, busbw)
    total = 2 * gather + ring_allgather_s(inp.grad_bytes, ranks, busbw)
    first_block = gather / (inp.layers or 1)
    return total - min(inp.overlap * (total - first_block), inp.compute_s)


def exposed_comm_s(inp: Inputs, per_node: int, nodes: int) -> float:
    """The all-reduce time backward does not hide: the last bucket always shows, the rest
    hides by `overlap`, and never more than the backward pass lasts (fsdp2: fsdp_comm_s)."""
    if inp.strategy == "fsdp2":
        return fsdp_comm_s(inp, per_node, nodes)
    total = (ring_allreduce_s(inp.grad_bytes, per_node, inp.intra_busbw_gbps)
             + ring_allreduce_s(inp.grad_bytes, nodes, inp.inter_busbw_gbps))
    last_bucket = min(1.0, inp.bucket_bytes / inp.grad_bytes)
    hidden = min(inp.overlap * (1 - last_bucket) * total, BACKWARD_SHARE * inp.compute_s)
    return total - hidden


def cores_per_rank(inp: Inputs, per_node: int) -> float | None:
    """CPU ranks: the cores each of a node's `per_node` ranks gets (None: devices)."""
    return None if inp.host_cores is None else inp.host_cores / per_node


def rank_compute_s(inp: Inputs, per_node: int) -> float:
    """One rank's compute: compute_s, or for CPU ranks sharing a host's cores, compute_s
    scaled by the threads it was measured with over the cores each rank now gets (never
    more cores than those threads: a rank gains nothing from cores it has no thread for)."""
    cores = cores_per_rank(inp, per_node)
    if cores is None:
        return inp.compute_s
    return inp.compute_s * inp.compute_threads / min(inp.compute_threads, cores)


def step_terms(inp: Inputs, devices: int, nodes: int) -> dict:
    """Every term of one step on `devices` over `nodes`, the step time and what sets it."""
    per_node = devices // nodes
    node_samples = per_node * inp.batch_size
    compute = rank_compute_s(inp, per_node)
    comm = exposed_comm_s(dataclasses.replace(inp, compute_s=compute), per_node, nodes)
    input_s = node_samples / inp.input_ceiling
    single_s = node_samples / inp.single_process_limit if inp.single_process_limit else 0.0
    step = max(compute + comm, input_s, single_s)
    if step > compute + comm:  # the node waits for its data path or its one process
        dominant = "input" if input_s >= single_s else "single-process"
    elif compute < comm:
        dominant = "communication"
    else:  # CPU ranks slowed by sharing their host's cores, or compute itself
        dominant = "shared cores" if compute > inp.compute_s * (1 + 1e-9) else "compute"
    return {"devices": devices, "nodes": nodes, "step_s": step, "compute_s": compute,
            "comm_s": comm, "input_s": input_s, "dominant": dominant,
            "samples_per_s": devices * inp.batch_size / step}


def default_sizes(devices_per_node: int, nodes: Sequence[int] | None = None,
                  ) -> list[tuple[int, int]]:
    """1, 2, 4 .. devices_per_node devices on one node, then whole nodes (default: powers
    of two up to DEFAULT_MAX_DEVICES devices)."""
    sizes = [(d, 1) for d in (2**i for i in range(12)) if d < devices_per_node]
    if nodes is None:
        nodes = [m for m in (2**i for i in range(11))
                 if m * devices_per_node <= DEFAULT_MAX_DEVICES] or [1]
    return sizes + [(devices_per_node * m, m) for m in nodes]


def project(inp: Inputs, sizes: Sequence[tuple[int, int]]) -> pd.DataFrame:
    """One row per (devices, nodes): samples/s, speedup and efficiency over one device, the
    terms of the step and the dominating one."""
    validate(inp, [(1, 1), *sizes])
    one = step_terms(inp, 1, 1)["samples_per_s"]
    rows = [step_terms(inp, d, m) for d, m in sizes]
    df = pd.DataFrame(rows)
    df["speedup"] = df["samples_per_s"] / one
    df["efficiency"] = df["speedup"] / df["devices"]
    df["tokens_per_s"] = df["samples_per_s"] * inp.seq_len if inp.seq_len else math.nan
    return df[["devices", "nodes", "samples_per_s", "tokens_per_s", "speedup", "efficiency",
               "step_s", "compute_s", "comm_s", "input_s", "dominant"]]


LM_FIELDS = ("strategy", "gather_bytes", "layers", "seq_len")  # shown only when set
WHAT_IF = {"inter_bw": "inter_busbw_gbps", "intra_bw": "intra_busbw_gbps",
           "input_ceiling": "input_ceiling", "batch_size": "batch_size", "compute": "compute_s",
           "overlap": "overlap", "bucket_mb": "bucket_bytes", "host_cores": "host_cores"}


def what_if(inp: Inputs, spec: str) -> Inputs:
    """`inter_bw=2x`, `input_ceiling=3000`, `batch_size=256`, `compute=1.5x` (faster), ..."""
    key, _, text = spec.partition("=")
    field, times = WHAT_IF.get(key), text.endswith("x")
    try:
        number = float(text.removesuffix("x"))
    except ValueError:
        field = None
    if field is None or (number <= 0 and key != "overlap"):
        raise UsageError(f"what_if: {spec!r} is not NAME=VALUE or NAME=Nx (a positive number), "
                         f"NAME one of {', '.join(WHAT_IF)}")
    old = getattr(inp, field)
    if times and old is None:
        raise UsageError(f"what_if: {key} has no value to multiply; {HOW[field]}")
    if key == "compute":  # compute=2x: twice one device's samples/s, half its step
        value = old / number if times else inp.batch_size / number
    else:
        value = old * number if times else number * (2**20 if key == "bucket_mb" else 1)
    changes = {field: value}
    if key == "batch_size":  # the compute time per sample stays
        changes = {field: int(value), "compute_s": inp.compute_s * int(value) / inp.batch_size}
    return dataclasses.replace(inp, **changes, sources={**inp.sources, field: f"what-if {spec}"})


def describe(inp: Inputs) -> pd.DataFrame:
    """Every input with its value and source, as the projection's first table."""
    def shown(value) -> str:
        if isinstance(value, str):
            return value
        if value is None or value == math.inf:
            return "-" if value is None else "unlimited"
        return f"{value:,.0f}" if abs(value) >= 1e6 else f"{value:,.6g}"

    values = {f.name: getattr(inp, f.name) for f in dataclasses.fields(inp) if f.name != "sources"}
    values = {name: value for name, value in values.items()  # a DDP projection shows no fsdp2 row
              if name not in LM_FIELDS or value not in (None, "ddp")}
    rows = [(name, shown(value), inp.sources.get(name, "-" if value is None else "given"))
            for name, value in values.items()]
    return pd.DataFrame(rows, columns=["input", "value", "source"])


def format_projection(df: pd.DataFrame) -> str:
    tokens = {} if df["tokens_per_s"].isna().all() else {
        "tokens_per_s_per_device": (df["tokens_per_s"] / df["devices"]).round(0)}
    return pd.DataFrame({
        "devices": df["devices"], "nodes": df["nodes"], "samples_per_s": df["samples_per_s"].round(1),
        **tokens, "speedup": df["speedup"].round(2), "efficiency_%": (100 * df["efficiency"]).round(1),
        "step_ms": (1e3 * df["step_s"]).round(1), "comm_ms": (1e3 * df["comm_s"]).round(1),
        "dominant": df["dominant"]}).to_string(index=False)
