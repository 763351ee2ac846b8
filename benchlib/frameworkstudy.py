"""The framework comparison (notebook 40): ResNet throughput the DLPerf way, on the
same launch layer as notebook 20, beside seed 003's published tables.

DLPerf's method (seed 003's train.sh on pytorch/examples' main.py): SGD with momentum
0.9 and learning rate = global batch / 1000; skip 5 iterations, warm up 20, average the
next 100; throughput = devices x batch / mean iteration time. Here each repeat of that
window is one sample and the median is reported. MFU = achieved FLOP/s per device
(torch.utils.flop_counter's count of a training step) over the device's dense peak for
the precision (benchlib/reference/peak_flops.csv); without a known peak it is None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchlib import launch, paths, reference
from benchlib.config import FrameworkConfig


@dataclass
class FrameworkResult:
    metrics: dict[str, Any]
    details: dict[str, Any]


def learning_rate(cfg: FrameworkConfig) -> float:
    return cfg.batch_size * cfg.nproc_per_node / 1000


def trainer_args(cfg: FrameworkConfig) -> list[str]:
    args = ["--model", cfg.arch, "--dataset", cfg.dataset, "--path", str(paths.resolve(cfg.path)),
            "--image-size", str(cfg.image_size), "--batch-size", str(cfg.batch_size),
            "--epochs", str(cfg.repeats), "--max-steps", str(cfg.steps),
            "--warmup-steps", str(cfg.skip_steps + cfg.warmup_steps),
            "--lr", str(learning_rate(cfg)), "--momentum", "0.9", "--precision", cfg.precision,
            "--num-workers", str(cfg.num_workers), "--device", cfg.device, "--backend", cfg.backend,
            "--timeout", str(cfg.timeout_s), "--seed", str(cfg.seed), "--log-interval", "0"]
    return args + ["--channels-last"] * cfg.channels_last + ["--compile"] * cfg.compile


def mfu(samples_per_s: float, devices: int, flops_per_sample: float, device_name: str,
        precision: str) -> tuple[float | None, str]:
    """(MFU, where the peak comes from); (None, why) when the peak is not known."""
    peak = reference.peak_flops(device_name, precision)
    if peak is None:
        return None, f"no published peak for {device_name} at {precision}"
    return samples_per_s / devices * flops_per_sample / peak[0], peak[1]


def run(cfg: FrameworkConfig, run_id: str = "interactive") -> FrameworkResult:
    cfg.check_runtime()
    strategy, launcher = ("ddp", cfg.launcher) if cfg.nproc_per_node > 1 else ("single", "single")
    out = launch.launch(strategy, trainer_args(cfg), paths.outputs_dir() / "logs" / run_id,
                        launcher, cfg.nproc_per_node, timeout_s=cfg.timeout_s)
    m = dict(out.result["metrics"])
    m["mfu"], m["mfu_peak_source"] = mfu(m["samples_per_s"], m["world_size"],
                                          m["flops_per_sample"], m["device_name"], cfg.precision)
    m["lr"] = learning_rate(cfg)
    m["samples_per_s_per_device"] = m["samples_per_s"] / m["world_size"]
    return FrameworkResult(m, out.result["details"])


def beside_published(cfg: FrameworkConfig, result: FrameworkResult):
    """Seed 003's rows for the same device count and the same batch size (or the
    nearest one the seed has, e.g. for a small CPU run), with ours on top."""
    import pandas as pd

    table = reference.dlperf()
    batch = min(set(table["batch_size"]), key=lambda b: (abs(b - cfg.batch_size), b))
    same = table[(table["batch_size"] == batch) & (table["devices"] == cfg.nproc_per_node)]
    ours = pd.DataFrame([{"framework": f"PyTorch here ({result.metrics['device_name']}, "
                                       f"{cfg.precision}{', NHWC' if cfg.channels_last else ''})",
                          "batch_size": cfg.batch_size, "devices": cfg.nproc_per_node,
                          "samples_per_s": result.metrics["samples_per_s"], "status": "measured",
                          "source": "this run"}])
    return pd.concat([ours, same[ours.columns]], ignore_index=True)


def describe(cfg: FrameworkConfig, result: FrameworkResult) -> str:
    m = result.metrics
    mfu_text = f"MFU {m['mfu']:.1%}" if m["mfu"] is not None else f"MFU unknown ({m['mfu_peak_source']})"
    return (f"{cfg.arch} {cfg.dataset} {cfg.image_size}px, batch {cfg.batch_size} x "
            f"{m['world_size']} on {m['device_name']}, {cfg.precision}"
            f"{', channels_last' if cfg.channels_last else ''}{', compiled' if cfg.compile else ''}: "
            f"{m['samples_per_s']:,.1f} samples/s (p10 {m['samples_per_s_p10']:,.1f}, "
            f"p90 {m['samples_per_s_p90']:,.1f}); {mfu_text}")
