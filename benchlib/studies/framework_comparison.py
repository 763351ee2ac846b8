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

import statistics
from dataclasses import dataclass
from typing import Any

from benchlib import reference
from benchlib.config import FrameworkComparisonConfig
from benchlib.config.choices import ARCHS
from benchlib.config.flags import config_argv
from benchlib.config.framework_comparison import JAX_FIELDS
from benchlib.config.performance import PerformanceConfig, compiled
from benchlib.core import compile_cost
from benchlib.core.metrics import (  # noqa: F401 - mfu: the one MFU function, here too
    mfu,
    mfu_figures,
    mfu_fp8_weighted,
)
from benchlib.core.stats import summarize
from benchlib.distributed.device import check_precision
from benchlib.errors import ConfigError
from benchlib.studies import checks, fp8, repeats, training
from benchlib.studies.repeats import Launch


@dataclass
class FrameworkResult:
    metrics: dict[str, Any]
    details: dict[str, Any]


def learning_rate(cfg: FrameworkComparisonConfig) -> float:
    return cfg.batch_size * cfg.nproc_per_node / 1000


def launches(cfg: FrameworkComparisonConfig, run_id: str = "interactive") -> list[Launch]:
    """The PyTorch trainer (one process, or ddp on `nproc_per_node` ranks the row's
    launcher way) once a window in process mode, once for all windows in epoch mode (a
    warm compile cache primed first); then, where the row asks for JAX and can have it
    (`jax_refused`), JAX's worker as many times with the same windows. Whether JAX is
    installed here is `run`'s to find (`jax_skipped`)."""
    strategy, launcher = ("ddp", cfg.launcher) if cfg.nproc_per_node > 1 else ("single", "single")
    count = launch_count(cfg)
    torch_side = repeats.repeated(Launch(strategy, _trainer_params(cfg), launcher,
                                         cfg.nproc_per_node, timeout_s=cfg.timeout_s,
                                         handed=("warmup_steps",)), count, one="")
    planned = repeats.warm_start(torch_side, repeats.row_logs(run_id), cfg)
    if jax_refused(cfg) is None:
        planned += [Launch("jax_resnet", _jax_args(cfg), timeout_s=cfg.timeout_s,
                           log="jax" if count == 1 else f"jax/launch-{r}", role="jax", repeat=r,
                           handed=("repeats",)) for r in range(count)]
    return planned


def _trainer_params(cfg: FrameworkComparisonConfig) -> dict[str, Any]:
    """The trainer worker's parameters (its run.json): the training fields and the
    performance settings of the row, by name (benchlib.studies.training), and DLPerf's
    schedule as the trainer counts it: each window an epoch of skipped, warm-up and timed
    steps, the skipped and warm-up ones left out, lr = global batch / 1000. Momentum is
    the trainer's 0.9, DLPerf's too (benchlib.config.training)."""
    return {**training.worker_params(cfg), **training.piece_params(cfg, PerformanceConfig),
            "epochs": windows_per_launch(cfg), "max_steps": cfg.steps,
            "warmup_steps": cfg.skip_steps + cfg.warmup_steps, "lr": learning_rate(cfg)}


def windows_per_launch(cfg: FrameworkComparisonConfig) -> int:
    """repeat_mode epoch: every repeat a window in one launch; process: one each."""
    return cfg.repeats if cfg.repeat_mode == "epoch" else 1


def launch_count(cfg: FrameworkComparisonConfig) -> int:
    return cfg.repeats if cfg.repeat_mode == "process" else 1


def preflight(cfg: FrameworkComparisonConfig) -> None:
    """Where the row runs: device, precision and backend, one rank per device, and an
    image folder big enough for the skipped, warm-up and timed steps."""
    cuda = checks.device_and_backend(cfg.device, cfg.backend)
    check_precision(cfg.precision, "cuda" if cuda else "cpu")
    visible = checks.visible_devices(cuda)
    if cfg.nproc_per_node > visible:
        what = "GPUs are visible" if cuda else "CPU cores are this job's (one rank each)"
        raise ConfigError("nproc_per_node", f"{cfg.nproc_per_node} asked for, but only "
                          f"{visible} {what}")
    own = checks.own_code_trains(cfg)
    checks.fp8_fits(cfg, cuda)
    if cfg.dataset != "synthetic":
        have = own if own is not None else \
            checks.data_prepared(cfg.path, "imagefolder")["samples"]["train"]
        steps = have // (cfg.batch_size * cfg.nproc_per_node)
        if steps < cfg.steps:
            raise ConfigError("timed_steps", f"the data set has {have} training samples: "
                              f"{steps} steps of batch {cfg.batch_size} x {cfg.nproc_per_node}, "
                              f"fewer than the {cfg.steps} skipped, warm-up and timed steps; "
                              "use more samples or fewer steps")


def run(cfg: FrameworkComparisonConfig, run_id: str = "interactive") -> FrameworkResult:
    preflight(cfg)
    skipped = jax_skipped(cfg)
    planned = [x for x in launches(cfg, run_id) if x.role != "jax" or skipped is None]
    done = repeats.launch_all(planned, repeats.row_logs(run_id))
    m, details = repeats.of_launches(cfg.repeat_mode, repeats.of_role(planned, done, "train"))
    m.update(mfu_figures(m["samples_per_s"], m["world_size"], m["device_name"], cfg.precision,
                         counted=m.get("flops_per_sample")))
    m["lr"] = learning_rate(cfg)
    m["samples_per_s_per_device"] = m["samples_per_s"] / m["world_size"]
    if compiled(cfg.compile):
        m.update(compile_cost.no_eager_row())
    if m.get("fp8") == "native":  # MFU over the peak its FP8 share could reach, too
        m.update(mfu_fp8_weighted(m["mfu"], m["device_name"], m.get("fp8_flops_share")))
    m["jax_skipped"] = skipped
    if skipped is None:
        jax = jax_figures([out.result["metrics"] for out in repeats.of_role(planned, done, "jax")])
        wanted = "gpu" if m["device_type"] == "cuda" else "cpu"
        if jax["jax_backend"] != wanted:  # e.g. a CPU-only jaxlib on a GPU node
            m["jax_skipped"] = f"JAX ran on {jax['jax_backend']}, PyTorch on {wanted}: not comparable"
        else:
            m.update(jax, jax_over_pytorch=jax["jax_samples_per_s"] / m["samples_per_s"])
    return FrameworkResult(*fp8.withhold(m, details))  # emulated FP8: no speed, no MFU


JAX_PRECISIONS = ("fp32", "amp_bf16")  # what benchlib.workers.jax_resnet runs


def jax_skipped(cfg: FrameworkComparisonConfig) -> str | None:
    """Why JAX is not measured beside this row, or None when it is."""
    import importlib.util

    if cfg.compare_jax and importlib.util.find_spec("jax") is None:
        return "JAX is not installed here (pip install 'benchlib[jax]')"
    return jax_refused(cfg)


def jax_refused(cfg: FrameworkComparisonConfig) -> str | None:
    """Why the row's settings cannot have JAX beside them (it is off, or JAX's worker does
    not run them), or None; whatever is installed."""
    if not cfg.compare_jax:
        return "compare_jax is off"
    if cfg.model not in ARCHS:
        return f"JAX trains the built-in ResNets only ({', '.join(ARCHS)}), not {cfg.model}"
    if cfg.nproc_per_node != 1 or cfg.dataset != "synthetic":
        return "JAX is measured on one device with synthetic data only"
    if cfg.precision not in JAX_PRECISIONS:
        return f"JAX runs {' or '.join(JAX_PRECISIONS)}, not {cfg.precision}"
    return None


def _jax_args(cfg: FrameworkComparisonConfig) -> list[str]:
    """benchlib.workers.jax_resnet's flags for the same ResNet, batch, image size,
    learning rate and timing window as the row's PyTorch run: the row's own fields, and
    the windows and learning rate its PyTorch launch runs."""
    return [*config_argv(cfg, only=JAX_FIELDS), "--repeats", str(windows_per_launch(cfg)),
            "--lr", str(learning_rate(cfg))]


def jax_figures(launched: list[dict[str, Any]]) -> dict[str, Any]:
    """The JAX launches' figures (each its metrics), prefixed `jax_`: one launch's as it
    gives them, several (process mode: one window each) summarized over the launches."""
    m = launched[0]
    if len(launched) > 1:
        m = {**m, **summarize([o["samples_per_s"] for o in launched], "samples_per_s"),
             "step_s": statistics.median(o["step_s"] for o in launched),
             "compile_s": statistics.median(o["compile_s"] for o in launched)}
    keep = ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "samples_per_s_n",
            "step_s", "compile_s", "timing", "jax_version", "jax_backend", "device_name")
    return {("" if k.startswith("jax_") else "jax_") + k: m[k] for k in keep}


def beside_published(cfg: FrameworkComparisonConfig, result: FrameworkResult):
    """Seed 003's rows for the same device count and the same batch size (or the
    nearest one the seed has, e.g. for a small CPU run), with ours on top."""
    import pandas as pd

    table = reference.dlperf()
    batch = min(set(table["batch_size"]), key=lambda b: (abs(b - cfg.batch_size), b))
    same = table[(table["batch_size"] == batch) & (table["devices"] == cfg.nproc_per_node)]
    m = result.metrics
    rows = [{"framework": f"PyTorch here ({m['device_name']}, "
                          f"{cfg.precision}{', NHWC' if cfg.channels_last else ''})",
             "batch_size": cfg.batch_size, "devices": cfg.nproc_per_node,
             "samples_per_s": m.get("samples_per_s"), "status": "measured", "source": "this run"}]
    if m.get("jax_samples_per_s") is not None:
        rows.append({**rows[0], "framework": f"JAX {m['jax_version']} here ({m['jax_backend']}, "
                                             f"{cfg.precision})",
                     "samples_per_s": m["jax_samples_per_s"]})
    ours = pd.DataFrame(rows)
    return pd.concat([ours, same[ours.columns]], ignore_index=True)


def describe(cfg: FrameworkComparisonConfig, result: FrameworkResult) -> str:
    m = result.metrics
    if fp8.emulated_line(m):
        return (f"{cfg.model} {cfg.dataset}, batch {cfg.batch_size} x {m['world_size']} on "
                f"{m['device_name']}: {fp8.emulated_line(m)}")
    mfu_text = f"MFU {m['mfu']:.1%}" if m["mfu"] is not None else f"MFU unknown ({m['mfu_peak_source']})"
    text = (f"{cfg.model} {cfg.dataset} {cfg.image_size}px, batch {cfg.batch_size} x "
            f"{m['world_size']} on {m['device_name']}, {cfg.precision}"
            f"{', channels_last' if cfg.channels_last else ''}"
            f"{f', compile {cfg.compile}' if compiled(cfg.compile) else ''}: "
            f"{m['samples_per_s']:,.1f} samples/s (p10 {m['samples_per_s_p10']:,.1f}, "
            f"p90 {m['samples_per_s_p90']:,.1f}); {mfu_text}")
    if m.get("jax_samples_per_s") is not None:
        return text + (f"\nJAX {m['jax_version']}, same model and timing: "
                       f"{m['jax_samples_per_s']:,.1f} samples/s (p10 {m['jax_samples_per_s_p10']:,.1f}, "
                       f"p90 {m['jax_samples_per_s_p90']:,.1f}), {m['jax_over_pytorch']:.2f}x "
                       f"PyTorch's; its first step (compile) took {m['jax_compile_s']:.1f} s")
    return text + f"\nJAX not measured: {m['jax_skipped']}; compared with the published tables only"
