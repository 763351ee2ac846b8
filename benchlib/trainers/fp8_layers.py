"""Float8 training's per-layer table at a model's own shapes (`python -m benchlib
fp8-layers MODEL --batch-size B --seq-len T`, notebook 50's FP8 section): each distinct
linear shape of the model (M rows of input a step, K in and N out features) timed as
nn.Linear in bf16 against torchao's Float8Linear in the recipe, forward and both backward
GEMMs (grad input, grad weight), compiled; its speedup with an interval, "keep in bf16"
where FP8 does not pay, and torchao's static filter's choice beside it.

Timing: `rounds` rounds, bf16 and FP8 in turn (which goes first alternating), each round
`iters` steps on the host clock after a synchronize (core.timing.StepClock), after a
warm-up of as many (the compile's). A round is one value of a side; the speedup is FP8's
median rate over bf16's with a bootstrap 95% interval over the rounds
(core.stats.ratio_interval; 5 rounds or more). The rounds share one process, so the
interval says how steady the timing was, not how a fresh process would differ: the
end-to-end A/B of separate launches (notebook 50) is the verdict. A shape pays where the
interval's lower bound is above 1; otherwise it is kept in bf16. `fp8_filter: measured`
converts the linears whose shape pays (trainers/fp8.py), from the table this writes under
outputs/fp8/, named by model, shape, recipe and device (`fp8.table_file`).

On a device without FP8 tensor cores (a CPU, a GPU before sm_89) the FP8 side runs
emulated: each shape is run once (the conversion and both GEMMs' backward checked), and
the table keeps no time, speedup or decision ("not judged").
"""

from __future__ import annotations

import argparse
import copy
import statistics
from pathlib import Path
from typing import Any

import torch
from torch import nn

from benchlib import atomic, paths
from benchlib.core import envinfo, stats
from benchlib.core.timing import StepClock
from benchlib.distributed.device import device_for
from benchlib.trainers import fp8
from benchlib.trainers.job import build_job


def _side(module: nn.Module, x: torch.Tensor, grad: torch.Tensor, compiled: bool):
    """One step of a linear: forward, then backward's two GEMMs (its input's and its
    weight's gradients), compiled as the training step would be."""
    forward = torch.compile(module) if compiled else module

    def step() -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        forward(x).backward(grad)
    return step


def _rounds(steps: dict[str, Any], clock: StepClock, rounds: int, iters: int) -> dict[str, list]:
    """Each side's seconds a step in each round, the sides in turn, the first alternating."""
    for step in steps.values():  # the warm-up: the compile, the allocator's first requests
        for _ in range(iters):
            step()
    times: dict[str, list[float]] = {side: [] for side in steps}
    for r in range(rounds):
        for side in list(steps)[::1 if r % 2 == 0 else -1]:
            start = clock.now()
            for _ in range(iters):
                steps[side]()
            times[side].append((clock.now() - start) / iters)
    return times


def time_shape(layer: fp8.Layer, precision: str, device: torch.device, emulated: bool,
               compiled: bool, rounds: int, iters: int, seed: int = 0) -> dict[str, Any]:
    """One shape's bf16 and FP8 seconds a step, per round."""
    torch.manual_seed(seed)
    linear = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias, device=device,
                       dtype=torch.bfloat16)
    float8 = fp8.torchao().convert_to_float8_training(
        nn.Sequential(copy.deepcopy(linear)), config=fp8.float8_config(precision, emulated))
    x = torch.randn(layer.rows, layer.in_features, device=device, dtype=torch.bfloat16,
                    requires_grad=True)
    grad = torch.randn(layer.rows, layer.out_features, device=device, dtype=torch.bfloat16)
    return _rounds({"bf16": _side(linear, x, grad, compiled),
                    "fp8": _side(float8, x, grad, compiled)}, StepClock(device), rounds, iters)


def judged(times: dict[str, list[float]], emulated: str | None) -> dict[str, Any]:
    """The shape's figures: where native, each side's median ms a step, FP8's speedup over
    bf16 with its interval over rounds, and whether it pays (the lower bound above 1);
    emulated, none of them (its times say nothing of FP8)."""
    if emulated:
        return {"bf16_ms": None, "fp8_ms": None, "speedup": None, "low": None, "high": None,
                "pays": None, "decision": "not judged: emulated"}
    out: dict[str, Any] = {"bf16_ms": statistics.median(times["bf16"]) * 1e3,
                           "fp8_ms": statistics.median(times["fp8"]) * 1e3}
    speed = stats.ratio_interval([[1 / t] for t in times["bf16"]], [[1 / t] for t in times["fp8"]])
    pays = speed.low is not None and speed.low > 1
    return {**out, "speedup": speed.ratio, "low": speed.low, "high": speed.high, "pays": pays,
            "decision": "fp8" if pays else "keep in bf16"}


def shapes(layers: list[fp8.Layer]) -> list[tuple[fp8.Layer, list[str]]]:
    """Each distinct M x K x N once (timed with a bias where one of them has one), with
    the names of the linears of that shape."""
    found: dict[str, tuple[fp8.Layer, list[str]]] = {}
    for layer in layers:
        first, names = found.setdefault(layer.shape, (layer, []))
        first.bias = first.bias or layer.bias
        names.append(layer.name)
    return list(found.values())


def measure(cfg: Any) -> dict[str, Any]:
    """The table of `cfg` (config/fp8_layers.py): every distinct shape timed, or kept
    untimed where FP8 cannot run it (its dimensions), with torchao's static filter's
    choice and where it differs from the measured one."""
    device = device_for(cfg.device)
    job = build_job(argparse.Namespace(**cfg.as_dict(), path=str(paths.outputs_dir() / "data")))
    rows = fp8.job_rows(job, cfg.batch_size, cfg.seed)
    layers = fp8.plan(job.model, cfg.precision, "none", rows)
    emulated = fp8.fp8_emulated(cfg.precision, device.type)
    # emulated, a time says nothing of FP8: each shape is run once, and not judged
    rounds, iters = (1, 1) if emulated else (cfg.rounds, cfg.iters)
    seq_len = job.shape[0] if job.vocab_size else 0
    table_rows = []
    for layer, names in shapes(layers):
        row = {"shape": layer.shape, "rows": layer.rows, "in_features": layer.in_features,
               "out_features": layer.out_features, "bias": layer.bias, "layers": names,
               "count": len(names), "torchao": layer.auto}
        if layer.convert:
            row.update(judged(time_shape(layer, cfg.precision, device, emulated is not None,
                                         cfg.compile, rounds, iters, cfg.seed), emulated))
        else:
            row.update(bf16_ms=None, fp8_ms=None, speedup=None, low=None, high=None, pays=False,
                       decision=f"keep in bf16: {layer.reason}")
        row["differs"] = None if row["pays"] is None or layer.auto is None else \
            bool(row["pays"]) != layer.auto
        table_rows.append(row)
    device_name = envinfo.device_name(device)
    return {"model": cfg.model, "model_args": cfg.model_args, "batch_size": cfg.batch_size,
            "seq_len": seq_len, "precision": cfg.precision,
            "recipe": fp8.FP8_RECIPES[cfg.precision], "device_name": device_name,
            "fp8": "emulated" if emulated else "native", "fp8_why": emulated,
            "compiled": cfg.compile, "rounds": rounds, "iters": iters,
            "interval": "bootstrap 95% over rounds in one process", "rows": table_rows,
            "file": str(fp8.table_file(cfg.model, cfg.model_args, cfg.batch_size, seq_len,
                                   cfg.precision, device_name))}


def write(table: dict[str, Any]) -> Path:
    """The table where `fp8_filter: measured` finds it."""
    path = Path(table["file"])
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, table)
    return path


def text(table: dict[str, Any]) -> str:
    """The table as printed: one line per shape, then torchao's choices where they differ."""
    def ms(v: float | None) -> str:
        return f"{v:8.3f}" if v is not None else f"{'-':>8}"

    lines = [f"{table['model']} at batch {table['batch_size']}"
             + (f", {table['seq_len']} tokens" if table["seq_len"] else "")
             + f", {table['precision']} on {table['device_name']} "
             f"({'compiled' if table['compiled'] else 'eager'}; {table['fp8']})",
             f"{'M x K x N':>20} {'n':>3} {'bf16 ms':>8} {'fp8 ms':>8} {'speedup (95% CI)':>20}"
             f"  {'torchao':8} decision"]
    for row in table["rows"]:
        speed = f"x{row['speedup']:.2f} ({row['low']:.2f}-{row['high']:.2f})" \
            if row["speedup"] is not None and row["low"] is not None else \
            f"x{row['speedup']:.2f} (no CI)" if row["speedup"] is not None else "-"
        auto = {True: "fp8", False: "bf16", None: "no rule"}[row["torchao"]]
        lines.append(f"{row['shape']:>20} {row['count']:>3} {ms(row['bf16_ms'])} "
                     f"{ms(row['fp8_ms'])} {speed:>20}  {auto:8} {row['decision']}")
    differ = [r for r in table["rows"] if r["differs"]]
    if table["fp8_why"]:
        lines.append(f"not judged: {table['fp8_why']}")
    elif differ:
        lines.append("torchao's static filter differs on " + "; ".join(
            f"{r['shape']} ({', '.join(r['layers'][:2])}{', ...' if r['count'] > 2 else ''}): "
            f"it {'converts' if r['torchao'] else 'keeps'}, measured "
            f"{'pays' if r['pays'] else 'does not pay'}" for r in differ))
    else:
        lines.append("torchao's static filter agrees with the measured table on every shape")
    return "\n".join(lines)
