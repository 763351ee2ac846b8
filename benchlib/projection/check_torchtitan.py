"""The fsdp2 projection checked against torchtitan's published Llama 3.1 8B throughput
(benchlib/reference/torchtitan_llama.csv, from pytorch/torchtitan's
benchmarks/llama3_h100_202412_torchtitan.md; no part of the design used it).

For each technique (FSDP, + torch.compile, + Float8) the 8-GPU row (one node) gives the
compute: the compute_s for which the fsdp2 model's step on 1 node x 8 GPUs equals the
published step (local batch x seq_len / its tokens/s per GPU). The model then predicts the
128-GPU row (16 nodes), beside a naive baseline: the 8-GPU row's tokens/s per GPU (perfect
scaling).

The design, frozen before anything was scored: the bandwidths of the hardware the file
states, at 80% of line rate as the DLPerf check takes its InfiniBand port; overlap 0 (the
projection's default: nothing hidden, the upper bound of comm) as the DLPerf check has it;
the parameter and gradient bytes of torchtitan's defaults at the runs' commit. A sensitivity
table beside it shows what full prefetch and other bandwidths would have given.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from benchlib import reference
from benchlib.core.stats import median_abs_error
from benchlib.projection.scaling import Inputs, flops_per_token, step_terms

# ---- the frozen design: set before scoring, not to be tuned on any printed score
# Llama 3.1 8B, torchtitan's "8B" flavor at 9dec370: dim 4096, 32 layers, 32 heads (8 KV heads
# of 128), FFN 14336, vocabulary 128256, untied output: 2 x 128256 x 4096 embedding and output,
# 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096 norms), 4096 final norm.
LLAMA31_8B_PARAMS = 8_030_261_248
LAYERS = 32
EMBEDDING_PARAMS = 128_256 * 4096  # a lookup, no matmul: torchtitan leaves it out of N for MFU
D_MODEL = 4096
DEVICES_PER_NODE = 8  # "Each host has 8 NVIDIA H100 GPUs fully connected with NVLink"
# Assumption: NVLink 4 of H100 SXM, 450 GB/s per direction, at 80% (nccl-tests busbw).
INTRA_BUSBW_GBPS = 0.8 * 450
# From the file: "400 Gb/s per GPU" = 50 GB/s; a flat ring crosses nodes on every GPU's NIC
# (one NCCL channel per rail), so a node's 8 NICs carry it: 8 x 50 GB/s, at 80%.
INTER_BUSBW_GBPS = 0.8 * 8 * 50
OVERLAP = 0.0  # the projection's default: nothing hidden
PARAM_BYTES = 2.0  # bf16: torchtitan's --training.mixed_precision_param default
REDUCE_BYTES = 4.0  # fp32: torchtitan's --training.mixed_precision_reduce default
PEAK_FLOPS = 989.4e12  # H100 SXM dense bf16 (reference/peak_flops.csv), for the implied MFU
METRIC = "median absolute % error over the predicted 128-GPU cells"
SOURCE = ("pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Tables 1 and 3 "
          "(Llama 3.1 8B, FSDP, Grand Teton H100, Dec 2024)")
# What the sensitivity table varies, one at a time, from the frozen design.
SENSITIVITY = {"overlap": (0.0, 0.5, 1.0), "inter_busbw_gbps": (80.0, 160.0, 320.0, 400.0)}
# what the design assumed and nobody measured here, over the range it could plausibly be:
# backward hiding none to all of the communication; 4 to 10 x 400 Gb/s links a node at 80%
PLAUSIBLE = {"overlap": (0.0, 1.0), "inter_busbw_gbps": (160.0, 400.0)}


def node_inputs(row: pd.Series, overlap: float = OVERLAP,
                inter_busbw_gbps: float = INTER_BUSBW_GBPS) -> Inputs:
    """The fsdp2 inputs of one technique, compute_s fitted so that 1 node x 8 GPUs gives
    the published 8-GPU step (bisection: the step grows with compute_s)."""
    step = row["local_batch"] * row["seq_len"] / row["tokens_per_s_per_gpu"]
    inp = Inputs(compute_s=step, batch_size=int(row["local_batch"]),
                 grad_bytes=REDUCE_BYTES * LLAMA31_8B_PARAMS, devices_per_node=DEVICES_PER_NODE,
                 input_ceiling=np.inf, intra_busbw_gbps=INTRA_BUSBW_GBPS,
                 inter_busbw_gbps=inter_busbw_gbps, overlap=overlap, strategy="fsdp2",
                 gather_bytes=PARAM_BYTES * LLAMA31_8B_PARAMS, layers=LAYERS,
                 seq_len=int(row["seq_len"]))
    low, high = 0.0, step
    for _ in range(100):
        mid = (low + high) / 2
        node = step_terms(dataclasses.replace(inp, compute_s=mid), DEVICES_PER_NODE, 1)["step_s"]
        low, high = (mid, high) if node < step else (low, mid)
    return dataclasses.replace(inp, compute_s=(low + high) / 2)


def check_torchtitan(overlap: float = OVERLAP,
                     inter_busbw_gbps: float = INTER_BUSBW_GBPS) -> pd.DataFrame:
    """One row per technique and published multi-node GPU count: published and predicted
    tokens/s per GPU, the naive baseline, the errors and the comm the model charges."""
    df = reference.torchtitan_llama()
    rows = []
    for technique, table in df.groupby("technique", sort=False):
        base = table.loc[table["gpus"].idxmin()]
        inp = node_inputs(base, overlap, inter_busbw_gbps)
        for _, row in table[table["gpus"] > base["gpus"]].iterrows():
            terms = step_terms(inp, int(row["gpus"]), int(row["nodes"]))
            predicted = terms["samples_per_s"] * inp.seq_len / row["gpus"]
            rows.append({"technique": technique, "gpus": int(row["gpus"]),
                         "nodes": int(row["nodes"]), "published": row["tokens_per_s_per_gpu"],
                         "predicted": predicted, "naive": base["tokens_per_s_per_gpu"],
                         "comm_ms": 1e3 * terms["comm_s"], "step_ms": 1e3 * terms["step_s"]})
    out = pd.DataFrame(rows)
    out["error_%"] = 100 * (out["predicted"] / out["published"] - 1)
    out["naive_error_%"] = 100 * (out["naive"] / out["published"] - 1)
    return out


def implied_mfu(tokens_per_s: float, seq_len: int) -> float:
    """MFU of a published row by the PaLM FLOPs per token (N without the input embedding,
    as torchtitan counts it), against H100 SXM's bf16 peak."""
    flops = flops_per_token(LLAMA31_8B_PARAMS - EMBEDDING_PARAMS, LAYERS, D_MODEL, seq_len)
    return tokens_per_s * flops / PEAK_FLOPS


def sensitivity() -> pd.DataFrame:
    """The median absolute error with one design choice changed at a time."""
    rows = [{"changed": f"{name}={value:g}",
             "median_abs_error_%": median_abs_error(check_torchtitan(**{name: value})["error_%"])}
            for name, values in SENSITIVITY.items() for value in values]
    return pd.DataFrame(rows)


def report() -> str:
    """What `benchlib project --check torchtitan` prints: the design, the cells, the score."""
    df = reference.torchtitan_llama()
    table = check_torchtitan()
    base = df[(df["gpus"] == df["gpus"].min()) & ~df["technique"].str.contains("Float8")]
    mfu = ", ".join(f"{t} {100 * implied_mfu(x, s):.1f}%" for t, x, s in
                    zip(base["technique"], base["tokens_per_s_per_gpu"], base["seq_len"]))
    cells = table.round({"predicted": 0, "comm_ms": 1, "step_ms": 1, "error_%": 1,
                         "naive_error_%": 1}).astype({"predicted": int})
    return "\n".join([
        f"source: {SOURCE}",
        f"design (frozen): fsdp2, {LLAMA31_8B_PARAMS:,} parameters, all-gathers in bf16 "
        f"({PARAM_BYTES:g} bytes), reduce-scatter in fp32 ({REDUCE_BYTES:g} bytes), "
        f"{LAYERS} blocks, overlap {OVERLAP:g}, intra-node {INTRA_BUSBW_GBPS:g} GB/s "
        f"(assumed: H100 NVLink 450 GB/s at 80%), inter-node {INTER_BUSBW_GBPS:g} GB/s "
        "(8 x 400 Gb/s per node at 80%)",
        "compute: each technique's 8-GPU row, less the comm the model charges on one node",
        "the 8-GPU bf16 rows' MFU by 6N + 12 L d_model T FLOPs per token (PaLM; N without the "
        f"input embedding) at 989.4 TFLOP/s: {mfu} (the file: 33% to 39%)",
        f"metric: {METRIC}; naive: the 8-GPU row's tokens/s per GPU",
        "",
        cells.to_string(index=False),
        "",
        "sensitivity, one choice changed at a time:",
        sensitivity().round(2).to_string(index=False),
        "",
        summary(table),
    ])


def plausible_range() -> tuple[float, float]:
    """The smallest and largest median absolute error over the plausible range of the
    assumptions nobody measured (PLAUSIBLE's corners and the design's own values)."""
    overlaps = sorted({*PLAUSIBLE["overlap"], OVERLAP})
    links = sorted({*PLAUSIBLE["inter_busbw_gbps"], INTER_BUSBW_GBPS})
    errors = [median_abs_error(check_torchtitan(overlap=o, inter_busbw_gbps=bw)["error_%"])
              for o in overlaps for bw in links]
    return min(errors), max(errors)


def summary(table: pd.DataFrame) -> str:
    """The score with the assumptions it rests on and what it is over their plausible
    range: one figure at assumed values is not a finding."""
    low, high = plausible_range()
    (o_low, o_high), (b_low, b_high) = PLAUSIBLE["overlap"], PLAUSIBLE["inter_busbw_gbps"]
    return (f"torchtitan Llama 3.1 8B, {len(table)} cells: model {median_abs_error(table['error_%']):.1f}% "
            f"median absolute error at the design's assumptions (overlap {OVERLAP:g}, "
            f"{INTER_BUSBW_GBPS:g} GB/s between nodes), {low:.1f}% to {high:.1f}% over overlap "
            f"{o_low:g}-{o_high:g} and {b_low:g}-{b_high:g} GB/s, neither measured here; naive "
            f"{median_abs_error(table['naive_error_%']):.1f}%")
