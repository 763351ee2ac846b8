"""Published figures the analysis compares against, each with where it comes from.

    dlperf_resnet50.csv  seed 003's DLPerf tables: ResNet-50 v1.5 samples/s for OneFlow,
                         TensorFlow, PyTorch, MXNet and Paddle, batch 32/64/128/160,
                         1-32 V100s (status: ok, todo, oom)
    dlperf_pages_resnet50.csv  DLPerf's per-framework pages: FP32 RN50 tables, batch
                         128, 1-32 V100s, each with commit, page and table (the
                         projection check's out-of-sample set)
    published.csv        other published RN50 rows (NVIDIA DLE, Lambda, timm), each
                         with its source
    torchtitan_llama.csv torchtitan's Llama 3.1 8B FSDP tokens/s per GPU on 8 and 128
                         H100s (benchmarks/llama3_h100_202412_torchtitan.md; source and
                         hardware in torchtitan_llama.md)
    peak_flops.csv       dense peak FLOP/s per GPU and precision, from the data sheets,
                         for MFU (no row: MFU unknown, never invented)
"""

from __future__ import annotations

import csv
from pathlib import Path

HERE = Path(__file__).parent

# Seed 000 (the users' notes on singlegpu.py, their conclusion): GTX 1050, 5 epochs, seconds.
SEED000_TRAVERSE_FASHION_S = {"raw": 32.976, "preload": 2.076, "tensorclass": 3.645,
                              "tensorclass_memmap": 4.233, "np_memmap": 4.408}
SEED000_RAW_OVER_PRELOAD = SEED000_TRAVERSE_FASHION_S["raw"] / SEED000_TRAVERSE_FASHION_S["preload"]

# Seed 002 (the users' notes on their DP/DDP scripts): PyramidNet on CIFAR-10, Tesla P100 16 GB,
# batch 64 per script, 2 GPUs for DP and DDP.
SEED002_P100 = [
    {"strategy": "single", "devices": 1, "batch_s": 0.255, "epoch_s": 200.0, "gpu_util_pct": 98},
    {"strategy": "dp", "devices": 2, "batch_s": 0.170, "epoch_s": 138.0, "gpu_util_pct": 80},
    {"strategy": "ddp", "devices": 2, "batch_s": 0.274, "epoch_s": 111.0, "gpu_util_pct": 98.5},
]


def _rows(name: str) -> list[dict[str, str]]:
    with open(HERE / name, newline="") as f:
        return list(csv.DictReader(f))


def dlperf():
    """Seed 003's tables as a DataFrame (samples_per_s NaN where the seed says TODO or OOM),
    with each framework's speedup over its own 1-GPU row of the same batch size."""
    import pandas as pd

    df = pd.DataFrame(_rows("dlperf_resnet50.csv"))
    df = df.astype({"batch_size": int, "nodes": int, "devices": int})
    df["samples_per_s"] = pd.to_numeric(df["samples_per_s"])
    one = df[df["devices"] == 1].set_index(["framework", "batch_size"])["samples_per_s"]
    df["speedup"] = df["samples_per_s"] / [one.get((f, b)) for f, b in zip(df["framework"], df["batch_size"])]
    df["efficiency"] = df["speedup"] / df["devices"]
    return df


def published():
    import pandas as pd

    return pd.DataFrame(_rows("published.csv")).astype({"devices": int, "samples_per_s": float})


def peak_flops(device_name: str, precision: str) -> tuple[float, str] | None:
    """(peak FLOP/s, source) for a device name as torch reports it ('NVIDIA H100 80GB
    HBM3', 'NVIDIA H100 PCIe', 'Tesla V100-SXM2-16GB'), or None. The `gpu` column is a
    pattern of the exact model: H100 SXM, PCIe and NVL differ, as do V100 SXM2, PCIe and
    V100S. A name that matches no model, or models with different peaks, gives None:
    MFU unknown, never taken against the wrong peak."""
    import re

    found = {(float(row["flops"]), row["source"]) for row in _rows("peak_flops.csv")
             if row["precision"] == precision and re.search(row["gpu"], device_name)}
    return found.pop() if len({f for f, _ in found}) == 1 and len(found) == 1 else None


def dlperf_pages():
    """DLPerf's per-framework ResNet-50 FP32 tables (batch 128, 1-32 V100s, the cluster of
    seed 003), each row with the repository, commit, page and table it was read from: the
    projection check's out-of-sample set."""
    import pandas as pd

    df = pd.DataFrame(_rows("dlperf_pages_resnet50.csv"))
    return df.astype({"batch_size": int, "nodes": int, "devices": int, "samples_per_s": float})


def torchtitan_llama():
    """torchtitan's published Llama 3.1 8B FSDP throughput (tokens/s per GPU) on 8 and 128
    H100s, three techniques, with the table it was read from; sources and hardware in
    torchtitan_llama.md beside it."""
    import pandas as pd

    df = pd.DataFrame(_rows("torchtitan_llama.csv"))
    return df.astype({"gpus": int, "nodes": int, "tokens_per_s_per_gpu": float, "seq_len": int,
                      "local_batch": int, "global_batch": int})
