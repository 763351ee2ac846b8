"""The GPU check's steps (benchlib.gpucheck.check): each one's command line, time box,
parameters, result file and how its figures are read from that file, in the order a short
lease should run them, in two parts of one call each (PARTS). The study steps are rows of
parameter tables, run through each study's own parameter functions: ResNet-50 and JAX are
notebook 40's rows in params/framework_comparison_gpu.yaml (seed 003's DLPerf settings),
timm and transformers models its rows in params/framework_comparison_own_model_gpu.yaml,
the language model notebook 50's rows in params/transformer_training_gpu.yaml and the
largest batch notebook 15's ResNet-50 row in params/memory_and_batch_gpu.yaml.
`plan(out)` lays the steps out under one output folder. Runs nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchlib import paths, reference
from benchlib.config import (
    DpVsDdpConfig,
    FaultToleranceConfig,
    FrameworkComparisonConfig,
    MemoryAndBatchConfig,
    MultinodeLightningConfig,
    TransformerTrainingConfig,
)
from benchlib.config.flags import config_argv
from benchlib.config.performance import compiled
from benchlib.errors import ConfigError
from benchlib.gpucheck import compile_steps
from benchlib.launch.protocol import RUN_CONFIG
from benchlib.records import results
from benchlib.runs.params import expand, read_old_names, say_notes
from benchlib.studies import (
    dp_vs_ddp,
    fault_tolerance,
    framework_comparison,
    multinode_lightning,
    repeats,
    transformer_training,
)

STUDY = "gpu-check"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", "1"]
# Notebook 40's ResNet-50 rows on one GPU: their parameters are the table's, read here
GPU_TABLE = "params/framework_comparison_gpu.yaml"
# seconds each took on one H100, on the slower of the two hosts seen (docs/gpus.md);
# torch.compile's first step takes 40-60 s there: the compile step's time is mostly that
RESNET50_EXPECTED_S = {"fp32": 21, "tf32": 19, "amp_bf16": 18, "amp_bf16_cl": 17,
                       "amp_bf16_cl_compile": 84}
# the launcher steps' work, as the studies' configs name it: ResNet-18 on synthetic
# 224-pixel images, batch 128, on the GPU; a short window (2 epochs of 30 steps)
RESNET18 = {"model": "resnet18", "dataset": "synthetic", "batch_size": 128, "device": "gpu"}
SHORT = {"epochs": 2, "max_steps": 30, "warmup_steps": 5}
TARGET_RESNET50_H100 = 2800.0  # images/s: above Lambda's 2,616 and the vendor rows' 2,791

# Part 2's tables: models from outside benchlib through notebook 40, notebook 50's
# language model rows, notebook 15's largest batch
OWN_MODEL_TABLE = "params/framework_comparison_own_model_gpu.yaml"
LM_TABLE = "params/transformer_training_gpu.yaml"
MAXBATCH_TABLE = "params/memory_and_batch_gpu.yaml"
# the check's window for the language model rows: the table's 15 + 40 steps a window cut
# to 10 + 20 (after the first step a compiled row is steady; its time is the compile)
LM_WINDOW = {"warmup_steps": 10, "max_steps": 20}
TARGET_LM_MFU = 0.40  # gpt2-124m, 1,024 tokens, bf16, compiled, one GPU (issue 25)
MFU_FORMULA = "6N + 12·L·H·Q·T FLOPs per token (PaLM, appendix B)"
# the largest batch search starts at the batch the ResNet-50 rows train at on the device
# (doubling from 1 would add 8 trials of a process each)
MAXBATCH_START = 256
# Part 2's seconds, measured on one H200 (docs/gpu-check/2026-11-28-h200-run5*.md; the
# same chip as the H100 but for memory, process starts as on the faster H100 host): a
# compiled gpt2-124m row 44-53 s with a cold compile (lm_fsdp2's 32 s and the checkpointing
# rows' 39 s had lm_single's inductor cache), timm 14 s, hf 25 s, the traced DDP run 16 s
# and HTA 3 s; the largest batch 170 s for 13 trials on 139 GiB (256 to 2,048, then
# bisection to 1,700), one trial more since cuBLAS's allocation failure counts as a
# misfit. No table has an eager row: its 20 s is an estimate
LM_EXPECTED_S = {"compiled": 55, "eager": 20, "torchrun": 5}
OWN_MODEL_EXPECTED_S = {"timm": 15, "hf": 25}
MAXBATCH_EXPECTED_S = 185
HTA_EXPECTED_S = {"ddp_trace": 16, "hta_breakdown": 5}  # 12 steps, then HTA
PARTS = 3  # the steps fill three calls of under 10 minutes; `--part N` runs one


FASHION_SIZE = 10_000  # images in the IO steps' data set: 3 repeats of 0.1-1 s an epoch


@dataclass
class Step:
    """`expected_s`: what the step took on one H100, on the slower of the two hosts seen
    (docs/gpu-check/, 2026-11-27), for planning: a step starts only when that much of the
    budget is left. `timeout_s`: its own time box, about
    three times that, never cut short by the budget."""
    name: str
    argv: list[str]
    timeout_s: float
    params: dict[str, Any]
    result: str | None = None  # the JSON file the step writes (worker result or figures)
    figures: Callable[[dict[str, Any]], dict[str, Any]] = lambda r: r.get("metrics", {})
    outcome: dict[str, Any] = field(default_factory=dict)
    expected_s: float = 10.0
    # (folder, worker, parameters) of the run.json that argv's `--config` names, written
    # when the step starts (a dry run writes nothing)
    config: tuple[Path, str, dict[str, Any]] | None = None
    # the call that runs it (`--part`): 1 or 2; 0 for every part (env: the records carry it)
    part: int = 1
    # the study config its command line was made from, through the study's own parameter
    # functions (None: a step of no study's); its values are the record's `params`
    source: Any = None
    # figures read from the step's own output (a CLI that prints `record: PATH`), where
    # it writes no result file
    from_log: Callable[[str], dict[str, Any]] | None = None


def _worker(module: str, args: list[str], torchrun: bool = False,
            max_restarts: int = 0) -> list[str]:
    if torchrun:
        return [*TORCHRUN, "--max-restarts", str(max_restarts), "-m", f"benchlib.workers.{module}",
                *args]
    return [sys.executable, "-m", f"benchlib.workers.{module}", *args]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchlib", *args]


def _study_step(name: str, out: Path, res: Callable[[str], str], source: Any, worker: str,
                params: dict[str, Any], expected_s: float, *extra: str, torchrun: bool = False,
                max_restarts: int = 0, **kw: Any) -> Step:
    """A worker started as its study starts it: `params` (what the study's parameter
    function makes of `source`) in a run.json (`--config`) in the step's own folder, made
    anew when the step starts, and `extra`, the flags of the launch the check adds (a log
    folder, a group of one); time box three times `expected_s`."""
    folder = out / "work" / name
    argv = _worker(worker, ["--config", str(folder / RUN_CONFIG), *extra, "--result", res(name)],
                   torchrun=torchrun, max_restarts=max_restarts)
    return Step(name, argv, 3 * expected_s, source.as_dict(), res(name), expected_s=expected_s,
                config=(folder, worker, params), source=source, **kw)


def _resnet50_figures(precision: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def figures(result: dict[str, Any]) -> dict[str, Any]:
        m = dict(result["metrics"])
        peak = reference.peak_flops(m["device_name"], precision)
        m["mfu"] = (m["samples_per_s"] * m["flops_per_sample"] / peak[0]) if peak else None
        m["mfu_peak_source"] = peak[1] if peak else f"no published peak for {m['device_name']}"
        if "H100" in m["device_name"]:
            m["target_samples_per_s"] = TARGET_RESNET50_H100
            m["target_met"] = m["samples_per_s"] >= TARGET_RESNET50_H100
        return m
    return figures


def _calibrate_figures(result: dict[str, Any]) -> dict[str, Any]:
    loop, clock = result["loop"], result["clock"]
    return {"benchlib_over_bare": loop["ratio"], "benchlib_over_bare_p10": loop["ratio_p10"],
            "benchlib_over_bare_p90": loop["ratio_p90"],
            "extra_us_per_step": loop["extra_us_per_step"],
            "bare_samples_per_s": loop["bare_samples_per_s"],
            "event_over_wall": clock["event_over_wall"],
            "event_over_wall_p10": clock["event_over_wall_p10"],
            "event_over_wall_p90": clock["event_over_wall_p90"],
            "event_within_2pct": abs(clock["event_over_wall"] - 1) <= 0.02,
            "reported_samples_per_s": clock["reported_samples_per_s"]}


def plan(out: Path) -> list[Step]:
    """The steps of both parts, each part in the order a short lease should run it."""
    res = lambda name: str(out / "work" / f"{name}.json")  # noqa: E731
    # the largest batch last: its trials are the part's longest and least known step
    part2 = [*_lm_steps(out, res), *_own_model_steps(out, res), *_hta_steps(out, res),
             _maxbatch_step(out)]
    for step in part2:
        step.part = 2
    return [*_setup_steps(out, res), *_calibrate_steps(res), *_resnet50_steps(out, res),
            *_training_steps(out, res), _jax_step(res), *_io_steps(out), *part2,
            # part 3: notebook 55's rows, eager, cold and warm
            *compile_steps.plan(out, res, _study_step, table_rows)]


def part_of(steps: list[Step], part: int | list[int]) -> list[Step]:
    """The steps one call runs: the part's (or each part's, in the order given), and
    those of every part, once, first."""
    parts = [part] if isinstance(part, int) else part
    return [s for s in steps if s.part == 0] + [s for p in parts for s in steps if s.part == p]


def _setup_steps(out: Path, res: Callable[[str], str]) -> list[Step]:
    """The environment, the generated data, and NCCL on one rank."""
    data = out / "data"
    return [
        Step("env", _cli("env", "--json"), 60, {}, expected_s=7, part=0),
        Step("data", _cli("data", "--path", str(data), "--offline", "--dataset", "fashion-mnist",
                          "--fashion-size", str(FASHION_SIZE)), 60,
             {"fashion_size": FASHION_SIZE}, expected_s=12),
        Step("doctor_nccl", _worker("doctor", ["--device", "gpu", "--backend", "nccl",
                                               "--group-of-one", "--result", res("doctor_nccl")],
                                    torchrun=True), 60, {"backend": "nccl", "world_size": 1},
             res("doctor_nccl"), expected_s=14),
        Step("allreduce_nccl", _worker("allreduce", ["--device", "gpu", "--backend", "nccl",
                                                     "--group-of-one", "--max-bytes", str(256 * 2**20),
                                                     "--result", res("allreduce_nccl")],
                                       torchrun=True), 60, {"backend": "nccl", "world_size": 1},
             res("allreduce_nccl"), expected_s=13),
    ]


def _calibrate_steps(res: Callable[[str], str]) -> list[Step]:
    steps: list[Step] = []
    for model, batch, n, rounds, expected in (("toynet", 64, 50, 40, 18),
                                              ("resnet18", 64, 20, 8, 27)):
        name = f"calibrate_{model}"
        steps.append(Step(name, _cli("calibrate", "--device", "gpu", "--model", model,
                                     "--batch-size", str(batch), "--steps", str(n), "--rounds",
                                     str(rounds), "--json", res(name)), 3 * expected,
                          {"model": model, "batch_size": batch, "steps": n, "rounds": rounds},
                          res(name), _calibrate_figures, expected_s=expected))
    return steps


def table_rows(table: str, config: type, notebook: str,
               overrides: dict[str, Any] | None = None) -> list[Any]:
    """A parameter table's rows as its notebook reads them: the notebook's defaults (its
    config's), the study's defaults, the row, then the check's `overrides`; each a
    validated `config`. A table of one study or of several under `studies:`."""
    doc, notes = yaml.safe_load((paths.project_root() / table).read_text()), {}
    rows = [read_old_names(config, {**study.get("defaults", {}), **row}, table, notes)
            for study in doc.get("studies", [doc]) for row in expand(study, table)]
    say_notes(notes, table)
    known = set(config.field_names())
    for i, row in enumerate(rows, start=1):  # from_params would drop a misspelt name unseen
        if set(row) - known:
            raise ConfigError(sorted(set(row) - known)[0], f"not a parameter of {notebook} "
                              f"({table}, row {i}); it takes {', '.join(sorted(known))}")
    return [config.from_params({**row, **(overrides or {})}) for row in rows]


def gpu_rows() -> list[FrameworkComparisonConfig]:
    """GPU_TABLE's rows as notebook 40 reads them."""
    return table_rows(GPU_TABLE, FrameworkComparisonConfig, "notebook 40")


def _variant(cfg: FrameworkComparisonConfig) -> str:
    return cfg.precision + ("_cl" if cfg.channels_last else "") + ("_compile" if compiled(cfg.compile) else "")


def _resnet50_steps(out: Path, res: Callable[[str], str]) -> list[Step]:
    """Each row's trainer worker (benchlib.workers.single, as notebook 40 launches one
    device) with the row's own parameters in a run.json (`--config`)."""
    return [_study_step(f"resnet50_{_variant(cfg)}", out, res, cfg, "single",
                        framework_comparison.trainer_params(cfg),
                        RESNET50_EXPECTED_S[_variant(cfg)],
                        figures=_resnet50_figures(cfg.precision)) for cfg in gpu_rows()]


def _training_steps(out: Path, res: Callable[[str], str]) -> list[Step]:
    """ResNet-18 through each launcher, each made by its study: DDP over NCCL and
    DataParallel (notebook 20), Lightning (notebook 30), an elastic restart (notebook 35:
    rank 0 killed after step 12 of 20, resumed from step 10's checkpoint)."""
    logs = out / "logs"
    ddp = DpVsDdpConfig(**RESNET18, **SHORT, strategy="ddp", nproc_per_node=1, backend="nccl")
    dp = DpVsDdpConfig(**RESNET18, **SHORT, strategy="dp", nproc_per_node=1)
    lightning = MultinodeLightningConfig(**RESNET18, **SHORT, trainer="lightning",
                                         launcher="lightning", nnodes=1, nproc_per_node=1)
    restart = FaultToleranceConfig(**{**RESNET18, "dataset": "dummy"}, epochs=1, max_steps=20,
                                   checkpoint_every=5, fail_at_step=12, fail_rank=0,
                                   nproc_per_node=1, max_restarts=1, compare_uninterrupted=False)
    return [
        _study_step("ddp_nccl", out, res, ddp, "ddp", dp_vs_ddp.trainer_params(ddp), 22,
                    "--group-of-one", torchrun=True),
        _study_step("dp", out, res, dp, "dp", dp_vs_ddp.trainer_params(dp), 17),
        _study_step("lightning", out, res, lightning, "lightning",
                    multinode_lightning.worker_params(lightning), 27,
                    "--log-dir", str(logs / "lightning")),
        _study_step("elastic_restart", out, res, restart, "elastic",
                    fault_tolerance.worker_params(restart, str(out / "work" / "elastic_restart"
                                                               / "checkpoints"), True), 36,
                    "--log-dir", str(logs / "elastic"), torchrun=True,
                    max_restarts=restart.max_restarts),
    ]


def _jax_step(res: Callable[[str], str]) -> Step:
    """JAX beside the GPU table's row that asks for it (compare_jax), with the flags
    notebook 40 gives it. Its first step (XLA's compile) takes 12-18 s of its 35-40."""
    cfg = next(c for c in gpu_rows() if c.compare_jax)
    return Step("jax_resnet50", _worker("jax_resnet", [
        *framework_comparison.jax_args(cfg), "--result", res("jax_resnet50")]), 100,
        {**cfg.as_dict(), "framework": "jax"}, res("jax_resnet50"), expected_s=40, source=cfg)


# IO steps' seconds on one H100 host at 10,000 images: raw's four settings in one
# process (the four single-setting processes took 62 s there on 2026-11-27, 6-8 s of each
# a process start); the A/B, 5 launches of 8 settings of 1 repeat, ~8 s start + ~6 s each
IO_EXPECTED_S = {"raw": 40, "ab": 75}
IO_MODES, IO_WORKERS = ("train", "traverse"), (0, 4)
IO_AB = ("preload", "preload_batched")  # per-item against batched fetch: the claim to test
IO_AB_LAUNCHES = 5  # the fewest that give a 95% interval (core.stats.MIN_LAUNCHES)


def _io_steps(out: Path) -> list[Step]:
    """Raw files, each mode and worker count in one process; then preload against
    preload_batched as an interleaved A/B over 5 launches (io_grid)."""
    data, grid = out / "data", ["--modes", ",".join(IO_MODES),
                                "--workers", ",".join(map(str, IO_WORKERS))]
    io = ["1", "gpu", "--path", str(data), "--dataset", "fashion-mnist",
          "--table", STUDY + "-io", "--outputs", str(out)]
    params = {"dataset": "fashion-mnist", "fashion_size": FASHION_SIZE, "modes": list(IO_MODES),
              "num_workers": list(IO_WORKERS), "epochs": 1}
    summary = str(out / "work" / "io_ab.json")
    return [
        Step("io_raw", [sys.executable, "-m", "benchlib.gpucheck.io_grid", *grid, *io,
                        "--variant", "raw", "--repeats", "3"], 100,
             {**params, "variant": "raw", "repeats": 3}, expected_s=IO_EXPECTED_S["raw"],
             from_log=io_figures),
        Step("io_ab", [sys.executable, "-m", "benchlib.gpucheck.io_grid", *grid,
                       "--variants", ",".join(IO_AB), "--launches", str(IO_AB_LAUNCHES),
                       "--summary", summary, *io, "--repeats", "1"], 200,
             {**params, "variants": list(IO_AB), "launches": IO_AB_LAUNCHES, "repeats": 1},
             summary, _ab_figures, expected_s=IO_EXPECTED_S["ab"]),
    ]


IO_FIGURES = ("samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "epoch_s", "data_s",
              "compute_s")


def _printed_records(log: str) -> list[dict[str, Any]]:
    """The records a benchlib CLI names in its output (`record: PATH` lines)."""
    return [results.read_record(Path(line[len("record: "):])) for line in log.splitlines()
            if line.startswith("record: ")]


def io_figures(log: str) -> dict[str, Any]:
    """Each `benchlib io` run prints `record: PATH`; its metrics are the figures, keyed by
    the setting: `train_w4_samples_per_s` for mode train with 4 workers."""
    figures: dict[str, Any] = {}
    for record in _printed_records(log):
        setting = f"{record['params']['mode']}_w{record['params']['num_workers']}"
        figures.update({f"{setting}_{k}": record["metrics"].get(k) for k in IO_FIGURES})
        figures["device_name"] = record["metrics"].get("device_name")
    return figures


def _ab_figures(s: dict[str, Any]) -> dict[str, Any]:
    """The A/B summary, flat: each setting's median and spread over launches, and each
    ratio with its interval and verdict."""
    figures: dict[str, Any] = {}
    for name, m in s["settings"].items():
        figures.update({f"{name}_{k}": m[k] for k in ("samples_per_s", "samples_per_s_p10",
                                                      "samples_per_s_p90", "samples_per_s_n")})
    for a in s["ab"]:
        key = f"ab_{a['new']}_over_{a['base']}_{a['setting']}"
        figures.update({key: a["ratio"], f"{key}_low": a["low"], f"{key}_high": a["high"],
                        f"{key}_verdict": a["verdict"]})
    return figures


# Part 2: the language model, models from outside benchlib, the largest batch


def _lm_name(cfg: TransformerTrainingConfig) -> str:
    """lm_single, lm_fsdp2, lm_single_ac_full; `_eager` where the row does not compile."""
    return ("lm_" + cfg.strategy + (f"_ac_{cfg.ac}" if cfg.ac != "none" else "")
            + ("" if compiled(cfg.compile) else "_eager"))


def lm_rows() -> list[TransformerTrainingConfig]:
    """LM_TABLE's rows as notebook 50 reads them, in the check's short window."""
    return table_rows(LM_TABLE, TransformerTrainingConfig, "notebook 50", LM_WINDOW)


def _is_lm_target(cfg: TransformerTrainingConfig) -> bool:
    """The row the MFU target is for: one device, compiled, no checkpointing."""
    return cfg.strategy == "single" and compiled(cfg.compile) and cfg.ac == "none"


def _lm_figures(cfg: TransformerTrainingConfig) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The worker's metrics with notebook 50's figures (tokens/s, MFU by the analytic
    count over the device's dense peak for the precision), the formula and the peak
    used; for the target row, the MFU target and a pass/fail sentence."""
    def figures(result: dict[str, Any]) -> dict[str, Any]:
        m = dict(result["metrics"])
        m.update(repeats.token_figures(m))
        m.update(transformer_training.lm_figures(m, cfg.precision))
        peak = reference.peak_flops(m["device_name"], cfg.precision)
        m.update(mfu_formula=MFU_FORMULA, mfu_peak_flops=peak[0] if peak else None)
        if _is_lm_target(cfg):
            m.update(target_mfu=TARGET_LM_MFU, target=lm_target_line(m, cfg))
            m["target_met"] = m["mfu"] >= TARGET_LM_MFU if m["mfu"] is not None else None
        return m
    return figures


def lm_target_line(m: dict[str, Any], cfg: TransformerTrainingConfig) -> str:
    """`PASS: MFU 43.1% >= 40% ...` with the count, the rate and the peak it came from."""
    what = (f"{cfg.model}, {cfg.seq_len} tokens, {cfg.precision}, compiled, one "
            f"{m['device_name']}")
    if m["mfu"] is None:
        return f"NOT JUDGED: MFU unknown ({m['mfu_peak_source']}); {what}"
    passed = m["mfu"] >= TARGET_LM_MFU
    return (f"{'PASS' if passed else 'FAIL'}: MFU {m['mfu']:.1%} {'>=' if passed else '<'} "
            f"{TARGET_LM_MFU:.0%} target; {what}: {m['tokens_per_s_per_device']:,.0f} tokens/s "
            f"x {m['flops_per_token_analytic']:,.0f} FLOPs per token by {MFU_FORMULA}, over "
            f"the dense {cfg.precision} peak {m['mfu_peak_flops'] / 1e12:,.1f} TFLOP/s "
            f"({m['mfu_peak_source']})")


def _lm_steps(out: Path, res: Callable[[str], str]) -> list[Step]:
    """Notebook 50's rows on one GPU: each row's worker (single, or fsdp2 under torchrun
    as a group of one) with the row's parameters in a run.json, as the study launches it."""
    steps: list[Step] = []
    for cfg in lm_rows():
        worker = "single" if cfg.strategy == "single" else cfg.strategy
        expected = (LM_EXPECTED_S["compiled" if compiled(cfg.compile) else "eager"]
                    + (LM_EXPECTED_S["torchrun"] if worker != "single" else 0))
        steps.append(_study_step(_lm_name(cfg), out, res, cfg, worker,
                                 transformer_training.trainer_params(cfg), expected,
                                 torchrun=worker != "single", figures=_lm_figures(cfg)))
    return steps


def own_model_rows() -> list[FrameworkComparisonConfig]:
    """OWN_MODEL_TABLE's rows (timm:, hf:) as notebook 40 reads them."""
    return table_rows(OWN_MODEL_TABLE, FrameworkComparisonConfig, "notebook 40")


def _model_figures(cfg: FrameworkComparisonConfig) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The worker's metrics, tokens/s for token data, and MFU over the device's peak."""
    def figures(result: dict[str, Any]) -> dict[str, Any]:
        m = dict(result["metrics"])
        m.update(repeats.token_figures(m))
        m["mfu"], m["mfu_peak_source"] = framework_comparison.mfu(
            m["samples_per_s"], 1, m["flops_per_sample"], m["device_name"], cfg.precision)
        return m
    return figures


def _own_model_steps(out: Path, res: Callable[[str], str]) -> list[Step]:
    """timm:NAME and hf:NAME through notebook 40's trainer worker, as the ResNet-50 rows."""
    return [_study_step(cfg.model.replace(":", "_").replace("-", "_").replace(".", "_"), out,
                        res, cfg, "single", framework_comparison.trainer_params(cfg),
                        OWN_MODEL_EXPECTED_S[cfg.model.split(":")[0]],
                        figures=_model_figures(cfg)) for cfg in own_model_rows()]


def maxbatch_row() -> MemoryAndBatchConfig:
    """MAXBATCH_TABLE's ResNet-50 row as notebook 15 reads it, from MAXBATCH_START."""
    rows = table_rows(MAXBATCH_TABLE, MemoryAndBatchConfig, "notebook 15",
                      {"start_batch": MAXBATCH_START})
    return next(cfg for cfg in rows if cfg.model == "resnet50")


def maxbatch_figures(log: str) -> dict[str, Any]:
    """The record `benchlib maxbatch` prints: the boundary and the batches tried."""
    (record,) = _printed_records(log)
    return record["metrics"]


def _maxbatch_step(out: Path) -> Step:
    """`benchlib maxbatch` for ResNet-50 by CUDA's own memory: a batch that raises
    OutOfMemoryError is a row that does not fit, and the search goes on."""
    cfg = maxbatch_row()
    return Step("maxbatch_resnet50", _cli("maxbatch", *config_argv(cfg), "--outputs", str(out),
                                          "--table", STUDY + "-maxbatch"),
                3 * MAXBATCH_EXPECTED_S, cfg.as_dict(), expected_s=MAXBATCH_EXPECTED_S,
                from_log=maxbatch_figures, source=cfg)


def hta_figures(log: str) -> dict[str, Any]:
    """Rank 0's figures from the JSON `python -m benchlib.diagnose.traces` prints last (HTA's
    temporal breakdown and comm/comp overlap, percent), or why HTA did not run."""
    found = json.loads(next(line for line in reversed(log.splitlines()) if line.startswith("{")))
    if "missing" in found:
        return {"hta_missing": found["missing"]}
    return {f"hta_{k}": v for k, v in found["ranks"][0].items() if k != "rank"}


def _hta_steps(out: Path, res: Callable[[str], str]) -> list[Step]:
    """A traced DDP run over NCCL (notebook 20's ResNet-18 with `export_trace`: a Kineto
    trace of its rank), then Holistic Trace Analysis over it, as `benchlib diagnose` runs
    it: the temporal breakdown and comm/comp overlap on real CUDA kernels."""
    ranks = out / "logs" / "ddp_trace_ranks"  # the worker's own log folder: trace/ inside
    traced = DpVsDdpConfig(**RESNET18, epochs=1, max_steps=12, warmup_steps=3, strategy="ddp",
                           nproc_per_node=1, backend="nccl", export_trace=True)
    return [
        _study_step("ddp_trace", out, res, traced, "ddp", dp_vs_ddp.trainer_params(traced),
                    HTA_EXPECTED_S["ddp_trace"], "--group-of-one", "--log-dir", str(ranks),
                    torchrun=True, part=2),
        Step("hta_breakdown", [sys.executable, "-m", "benchlib.diagnose.traces",
                               str(ranks / "trace")], 3 * HTA_EXPECTED_S["hta_breakdown"],
             {"trace_dir": str(ranks / "trace")}, expected_s=HTA_EXPECTED_S["hta_breakdown"],
             part=2, from_log=hta_figures),
    ]
