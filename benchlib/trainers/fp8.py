"""Float8 training as a precision (torchao's `convert_to_float8_training`): which of a
model's linears FP8 converts and why, the conversion, and what a record says of it.

A precision fp8_tensorwise, fp8_rowwise or fp8_rowwise_gw_hp is torchao's recipe of that
name (`FP8_RECIPES`, config/choices.py). Each nn.Linear of the model is converted to
torchao's Float8Linear or kept in bf16, with its reason, by the first rule that decides:

    dims        in or out features not a multiple of 16: FP8 GEMMs (torch._scaled_mm)
                need both, so it stays in bf16 whatever the filter says (GPT-2's head:
                50,257 outputs)
    tied        with float8 all-gather, a weight another module shares (GPT-2's head and
                token embedding): torchao gives that weight a parameter of its own, which
                would untie it
    fp8_filter  auto: torchao's static filter (`_auto_filter_for_recipe`, thresholds from
                H100 benchmarks); measured: the per-layer table `benchlib fp8-layers`
                measured at the model's own shapes on this device (trainers/fp8_layers.py),
                converted where FP8 paid; none: every linear; names: those whose name
                contains one of them kept in bf16 (torchao's `filter_fqns` rule)

What FP8 does not convert runs in bf16 (autocast: core.loops.AUTOCAST; FSDP2's bf16
parameters: distributed/fsdp.py). Where the device has no FP8 tensor cores (a CPU, a GPU
before sm_89) the conversion runs emulated (torchao's `emulate`: float32 matmuls of
FP8-rounded values): the arithmetic is checked, no speed is (distributed/device.py,
`fp8_emulated`).

It lives here, beside the trainers that convert, not in core: it imports torchao, the
optional `[fp8]` extra, which nothing core measures with may need.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from benchlib import paths
from benchlib.config.choices import FP8_FILTERS, FP8_RECIPES
from benchlib.core import envinfo
from benchlib.distributed.device import fp8_emulated
from benchlib.errors import ConfigError

INSTALL = "pip install 'benchlib[fp8]' (torchao; docs/fp8.md)"
GEMM_MULTIPLE = 16  # torch._scaled_mm: both dimensions of each FP8 operand
SAMPLES = 2  # the batch whose forward counts each linear's rows (scaled to a step's)


@dataclass
class Layer:
    """One linear of the model: its shape at a step (`rows` of input, the batch's tokens
    for a language model; `in_features` K, `out_features` N), converted or kept in bf16
    and why, and what torchao's static filter would do (None: it has no rule for the
    recipe)."""

    name: str
    in_features: int
    out_features: int
    rows: int
    bias: bool
    convert: bool = False
    reason: str = ""
    auto: bool | None = None

    @property
    def shape(self) -> str:
        """M x K x N: the key of its row in a per-layer table."""
        return f"{self.rows}x{self.in_features}x{self.out_features}"

    @property
    def flops(self) -> int:
        """A step's FLOPs of its three GEMMs: forward, grad input, grad weight."""
        return 6 * self.rows * self.in_features * self.out_features


def torchao():
    """torchao.float8, or one line naming `precision` and how to install it."""
    try:
        import torchao.float8 as float8
    except ImportError:
        raise ConfigError("precision", f"float8 training needs torchao: {INSTALL}") from None
    return float8


def linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    return [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]


def rows_per_step(model: nn.Module, forward: Callable[[], Any], samples: int,
                  batch: int) -> dict[str, int]:
    """Each linear's input rows in a step of `batch` samples: counted by forward hooks in
    one forward of `samples` samples (`forward`, no gradients), scaled to the batch."""
    counted: dict[str, int] = {}

    def hook(name: str):
        def count(module, args, output):
            counted[name] = counted.get(name, 0) + args[0].numel() // module.in_features
        return count

    hooks = [m.register_forward_hook(hook(name)) for name, m in linears(model)]
    try:
        with torch.no_grad():
            forward()
    finally:
        for h in hooks:
            h.remove()
    return {name: rows * batch // samples for name, rows in counted.items()}


def job_rows(job: Any, batch: int, seed: int) -> dict[str, int]:
    """Each linear's input rows in a step of the job's model (trainers/job.py) at `batch`
    samples, counted on a batch of SAMPLES on the CPU."""
    x, y = job.batch(SAMPLES, seed)
    forward = (lambda: job.model(x, labels=y)) if job.objective.labels_kw else \
        (lambda: job.model(x))
    return rows_per_step(job.model, forward, SAMPLES, batch)


def table_file(model: str, model_args: dict, batch_size: int, seq_len: int, precision: str,
               device_name: str) -> Path:
    """Where `benchlib fp8-layers` keeps the table of this model at this shape (seq_len 0:
    images), recipe and device, and `fp8_filter: measured` reads it."""
    args = "-" + "-".join(f"{k}{v}" for k, v in sorted(model_args.items())) if model_args else ""
    name = f"{model}{args}-b{batch_size}-t{seq_len}-{precision}-{device_name}"
    return paths.outputs_dir() / "fp8" / (re.sub(r"[^\w.-]+", "_", name) + ".json")


def load_table(path: Path) -> dict[str, Any] | None:
    """A per-layer table as `plan` reads it: its rows by shape (M x K x N), its path and
    why it was emulated; None where none was measured."""
    if not path.exists():
        return None
    table = json.loads(path.read_text())
    return {**table, "path": str(path), "shapes": {row["shape"]: row for row in table["rows"]}}


def shared_weights(model: nn.Module) -> dict[str, str]:
    """Each linear whose weight another module holds too, and that module's name."""
    owners: dict[int, list[str]] = {}
    for name, module in model.named_modules():
        for p in module.parameters(recurse=False):
            owners.setdefault(id(p), []).append(name)
    return {name: next(o for o in owners[id(m.weight)] if o != name)
            for name, m in linears(model) if len(owners[id(m.weight)]) > 1}


def static_filter(precision: str) -> Callable[[nn.Module, str], bool] | None:
    """torchao's automatic filter for the recipe (None: it has none, as for
    rowwise_with_gw_hp)."""
    if precision == "fp8_rowwise_gw_hp":
        return None
    return torchao()._auto_filter_for_recipe(FP8_RECIPES[precision], filter_fqns=[])


def _measured(layer: Layer, table: dict[str, Any] | None) -> tuple[bool, str]:
    """The per-layer table's decision for the layer's shape (trainers/fp8_layers.py)."""
    if table is None:
        raise ConfigError("fp8_filter", "measured needs the per-layer table of this model at "
                          "this shape: python -m benchlib fp8-layers MODEL --batch-size B "
                          "--seq-len T on this device")
    row = table["shapes"].get(layer.shape)
    if row is None:
        raise ConfigError("fp8_filter", f"measured: {table['path']} has no row for "
                          f"{layer.name} ({layer.shape}, M x K x N); measure this model at "
                          "the row's batch and seq_len")
    if row["pays"] is None:
        raise ConfigError("fp8_filter", f"measured: {table['path']} was measured emulated "
                          f"({table['fp8_why']}); it decides nothing: use auto, none or names")
    speed = f"x{row['speedup']:.2f}" + (f" (95% CI {row['low']:.2f}-{row['high']:.2f})"
                                        if row["low"] is not None else " (no interval)")
    return row["pays"], (f"measured {speed}: pays" if row["pays"] else
                         f"measured {speed}: does not pay, kept in bf16")


def require_linears(model: nn.Module, precision: str) -> list[tuple[str, nn.Linear]]:
    """The model's linears; none is refused, naming `precision`."""
    found = linears(model)
    if not found:
        raise ConfigError("precision", f"{precision} converts nn.Linear layers, and "
                          f"{type(model).__name__} has none; use amp_bf16")
    return found


def plan(model: nn.Module, precision: str, fp8_filter: str, rows: dict[str, int],
         all_gather: bool = False, table: dict[str, Any] | None = None) -> list[Layer]:
    """Each linear's choice and reason (the rules of the module's docstring); a model with
    no linear is refused, naming `precision`."""
    found = require_linears(model, precision)
    auto = static_filter(precision)
    names = [] if fp8_filter in FP8_FILTERS else fp8_filter.split(",")
    shared = shared_weights(model) if all_gather else {}
    layers = []
    for name, m in found:
        layer = Layer(name, m.in_features, m.out_features, rows.get(name, 0), m.bias is not None,
                      auto=auto(m, name) if auto else None)
        if m.in_features % GEMM_MULTIPLE or m.out_features % GEMM_MULTIPLE:
            layer.reason = (f"{m.in_features} in x {m.out_features} out: FP8 GEMMs need both "
                            f"multiples of {GEMM_MULTIPLE}")
        elif name in shared:
            layer.reason = (f"weight shared with {shared[name]}: float8 all-gather gives it a "
                            "parameter of its own, which would untie it")
        elif fp8_filter == "none":
            layer.convert, layer.reason = True, "fp8_filter none: every linear"
        elif names:
            kept = [n for n in names if n in name]
            layer.convert = not kept
            layer.reason = f"named in fp8_filter ({kept[0]})" if kept else "not named in fp8_filter"
        elif fp8_filter == "auto":
            layer.convert = bool(layer.auto)
            layer.reason = (f"torchao's static filter for {FP8_RECIPES[precision]} (H100 "
                            f"thresholds) {'converts' if layer.auto else 'keeps'} "
                            f"K {m.in_features} x N {m.out_features}")
        else:
            layer.convert, layer.reason = _measured(layer, table)
        layers.append(layer)
    return layers


def float8_config(precision: str, emulate: bool, all_gather: bool = False):
    """torchao's Float8LinearConfig of the recipe."""
    config = torchao().Float8LinearConfig.from_recipe_name(FP8_RECIPES[precision])
    return dataclasses.replace(config, emulate=emulate, enable_fsdp_float8_all_gather=all_gather)


def _cpu_autocast(module: nn.Module, args: tuple) -> tuple | None:
    """Float8Linear casts its input to the autocast dtype on CUDA only (it asks
    torch.is_autocast_enabled(), CUDA's); on the CPU the same cast here, so that its
    gradients meet in one dtype as on a GPU (rowwise_with_gw_hp's bf16 gradient against a
    float32 input fails otherwise)."""
    if torch.is_autocast_enabled("cpu"):
        return (args[0].to(torch.get_autocast_dtype("cpu")), *args[1:])
    return None


@dataclass
class Converted:
    """A model converted for float8 training: its linears' choices, and why it is
    emulated (None: native FP8)."""

    precision: str
    fp8_filter: str
    layers: list[Layer]
    emulated: str | None
    gathered: int = 0  # weights FSDP2 all-gathers in float8 (torchao's weight wrapper)

    def figures(self, flops_per_step: float | None) -> dict[str, Any]:
        """What a record says: native or emulated (and why), the recipe and filter, the
        linears converted and kept, and the share of a step's FLOPs FP8 runs
        (`fp8_flops_share`, over `flops_per_step`; None without a FLOP count)."""
        converted = [layer for layer in self.layers if layer.convert]
        share = sum(layer.flops for layer in converted) / flops_per_step if flops_per_step \
            else None
        return {"fp8": "emulated" if self.emulated else "native",
                "fp8_recipe": FP8_RECIPES[self.precision], "fp8_converted": len(converted),
                "fp8_kept": len(self.layers) - len(converted), "fp8_flops_share": share,
                "fp8_all_gather_weights": self.gathered,
                **({"fp8_why": self.emulated} if self.emulated else {})}

    def details(self) -> dict[str, Any]:
        return {"fp8_layers": [{**dataclasses.asdict(layer), "shape": layer.shape}
                               for layer in self.layers]}


def convert(model: nn.Module, precision: str, fp8_filter: str, device_type: str,
            rows: dict[str, int], all_gather: bool = False,
            table: dict[str, Any] | None = None) -> Converted | None:
    """The model's chosen linears swapped for Float8Linear in place (before it is
    wrapped, compiled or sharded); None for a precision that is not FP8."""
    if precision not in FP8_RECIPES:
        return None
    why = fp8_emulated(precision, device_type)
    layers = plan(model, precision, fp8_filter, rows, all_gather, table)
    chosen = {layer.name for layer in layers if layer.convert}
    float8 = torchao()
    float8.convert_to_float8_training(model, config=float8_config(precision, why is not None,
                                                                  all_gather),
                                      module_filter_fn=lambda m, fqn: fqn in chosen)
    from torchao.float8.float8_linear import Float8Linear
    from torchao.float8.fsdp_utils import WeightWithDynamicFloat8CastTensor

    converted = [m for m in model.modules() if isinstance(m, Float8Linear)]
    if device_type != "cuda":
        for m in converted:
            m.register_forward_pre_hook(_cpu_autocast)
    gathered = sum(isinstance(m.weight, WeightWithDynamicFloat8CastTensor) for m in converted)
    return Converted(precision, fp8_filter, layers, why, gathered)


def for_job(args: Any, job: Any, device: torch.device) -> Converted | None:
    """The job's model converted as a worker's flags say (precision, fp8_filter,
    fp8_all_gather) at its per-device batch; None for a precision that is not FP8."""
    if args.precision not in FP8_RECIPES:
        return None
    table = None
    if args.fp8_filter == "measured":
        seq_len = job.shape[0] if job.vocab_size else 0
        path = table_file(args.model, args.model_args, args.batch_size, seq_len,
                          args.precision, envinfo.device_name(device))
        table = load_table(path)
        if table is None:
            raise ConfigError("fp8_filter", f"measured needs the per-layer table {path}: "
                              f"python -m benchlib fp8-layers {args.model} --batch-size "
                              f"{args.batch_size} --seq-len {seq_len} --precision "
                              f"{args.precision}, on this device")
    rows = job_rows(job, args.batch_size, args.seed)  # on the CPU, as the job was built
    job.model.to(device)  # converted where it trains: torchao's weights made on the device
    return convert(job.model, args.precision, args.fp8_filter, device.type, rows,
                   args.fp8_all_gather, table)


def converted_count(model: nn.Module) -> int:
    """How many of the model's modules are torchao's Float8Linear."""
    from torchao.float8.float8_linear import Float8Linear

    return sum(isinstance(m, Float8Linear) for m in model.modules())
