"""The transformer study (notebook 50): a decoder language model trained by one process,
DDP or FSDP2, with or without activation checkpointing and torch.compile, launched as
subprocesses like notebook 20's (`python -m benchlib.workers.<strategy>`).

Its figures: tokens/s (global and per device, with the spread of samples/s), MFU by the
analytic count of FLOPs per token (6N + 12·L·H·Q·T, PaLM appendix B; PyTorch's counted
FLOPs for a model without one, an hf: or your own) over the device's dense peak for the
precision (benchlib/reference/peak_flops.csv; None where no peak is published, as on a
CPU, with the reason), the two FLOP counts (analytic, PyTorch's counter) and their
ratio, and peak memory with its breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchlib.config import TransformerTrainingConfig
from benchlib.config.performance import PerformanceConfig, compiled
from benchlib.core import compile_cost
from benchlib.core.metrics import mfu_figures
from benchlib.distributed.device import check_precision
from benchlib.studies import checks, fp8, repeats, training
from benchlib.studies.repeats import Launch


@dataclass
class LmResult:
    metrics: dict[str, Any]
    details: dict[str, Any]


def launches(cfg: TransformerTrainingConfig, run_id: str = "interactive") -> list[Launch]:
    """The strategy's worker `repeats` times (single: one process; ddp and fsdp2:
    `nproc_per_node` ranks the row's launcher way), a warm compile cache primed first."""
    launcher, nproc = (cfg.launcher, cfg.nproc_per_node) if cfg.strategy != "single" \
        else ("single", 1)
    base = Launch(cfg.strategy, _trainer_params(cfg), launcher, nproc, timeout_s=cfg.timeout_s)
    if fp8.is_fp8(cfg):  # its A/B: bf16's twin beside each launch, interleaved
        return fp8.ab_launches(cfg, base)
    train = repeats.repeated(base, cfg.repeats)
    return repeats.warm_start(train, repeats.row_logs(run_id), cfg)


def _trainer_params(cfg: TransformerTrainingConfig) -> dict[str, Any]:
    """The worker's parameters (its run.json): the training fields and the performance
    settings (checkpointing, compile, precision, ...), by name."""
    return {**training.worker_params(cfg), **training.piece_params(cfg, PerformanceConfig)}


def preflight(cfg: TransformerTrainingConfig) -> None:
    """Where the row runs: device, precision and backend, one rank per device, FSDP2 in
    this torch, an epoch with a timed step; the model and data built on the CPU and one
    step's loss taken (a seq_len above the model's positions, ids beyond its vocabulary,
    checkpointing or FSDP2 on a model without blocks: one line, before any rank)."""
    cuda = checks.device_and_backend(cfg.device, cfg.backend)
    check_precision(cfg.precision, "cuda" if cuda else "cpu")
    checks.ranks_fit("nproc_per_node", cfg.nproc_per_node, cuda)
    if cfg.strategy == "fsdp2":
        checks.fsdp2_available()
    job = checks.own_job(cfg)  # the user's model and data, built once for both checks
    samples = checks.own_code_trains(cfg, job)
    checks.blocks_fit(cfg, job)
    checks.fp8_fits(cfg, cuda, job)
    ranks = cfg.nproc_per_node if cfg.strategy != "single" else 1
    checks.steps_fit(cfg, cfg.batch_size * ranks, samples)


def run(cfg: TransformerTrainingConfig, run_id: str = "interactive") -> LmResult:
    """The launches' tokens/s over epochs or launches as `repeat_mode` says, MFU; a
    compiled row its compile's seconds (the worker's) and no break-even (no eager row)."""
    preflight(cfg)
    log_dir, planned = repeats.row_logs(run_id), launches(cfg, run_id)
    done = repeats.launch_all(planned, log_dir)
    role = "fp8" if fp8.is_fp8(cfg) else "train"
    m, details = repeats.of_launches(cfg.repeat_mode, repeats.of_role(planned, done, role))
    m["log_dir"] = str(log_dir)
    m.update(lm_figures(m, cfg.precision))
    if compiled(cfg.compile):
        m.update(compile_cost.no_eager_row())
    if fp8.is_fp8(cfg):  # FP8 against its bf16 twins; an emulated row keeps no speed
        sides = {side: [fp8.per_launch(out, cfg.seed + x.repeat) for x, out in
                        zip(planned, done) if x.role == side] for side in ("bf16", "fp8")}
        m.update(fp8.figures(m, sides["bf16"], sides["fp8"]))
        details["fp8_ab"] = sides
        m, details = fp8.withhold(m, details)
    return LmResult(m, details)


def lm_figures(m: dict[str, Any], precision: str) -> dict[str, Any]:
    """tokens/s per device, and MFU over the device's peak: by the analytic count of
    benchlib's GPT (6N + 12·L·H·Q·T), by PyTorch's counted FLOPs for any other model
    (an hf: or entry-point one), the record saying which (`mfu_flops`)."""
    per_device = m["tokens_per_s"] / m["world_size"]
    return {"tokens_per_s_per_device": per_device,
            **mfu_figures(m["tokens_per_s"], m["world_size"], m["device_name"], precision,
                          analytic=m.get("flops_per_token_analytic"),
                          counted=m.get("flops_per_token"))}


def describe(cfg: TransformerTrainingConfig, result: LmResult) -> str:
    m = result.metrics
    if fp8.is_fp8(cfg):  # the A/B's answer first; an emulated row has no more to say
        answer = fp8.sentence(m, cfg.model, cfg.precision)
        if m.get("fp8") == "emulated":
            return answer
        return answer + "\n" + _line(cfg, m)
    return _line(cfg, m)


def _line(cfg: TransformerTrainingConfig, m: dict[str, Any]) -> str:
    """tokens/s with its spread, per device, MFU, the two FLOP counts, peak memory."""
    unit = "launches" if cfg.repeat_mode == "process" else "epochs"
    how = cfg.strategy + (f" on {m['world_size']} ranks" if cfg.strategy != "single" else "")
    saver = ", ".join(filter(None, [f"ac {cfg.ac}" if cfg.ac != "none" else "",
                                    f"compile {cfg.compile}" if compiled(cfg.compile) else "",
                                    cfg.precision]))
    mfu = f"MFU {m['mfu']:.1%}" if m.get("mfu") is not None else f"MFU unknown ({m['mfu_peak_source']})"
    peak = m.get("peak_bytes")
    memory = f", peak memory {peak / 2**20:,.0f} MiB ({m.get('peak_kind')})" if peak else ""
    return (f"{cfg.model}, {how} ({saver}) on {m['device_name']}: "
            f"{m['tokens_per_s']:,.0f} tokens/s (p10 {m['tokens_per_s_p10']:,.0f}, p90 "
            f"{m['tokens_per_s_p90']:,.0f} over {m['samples_per_s_n']} {unit}), "
            f"{m['tokens_per_s_per_device']:,.0f} per device; {mfu}; FLOPs per token "
            f"{m.get('flops_per_token_analytic', float('nan')):,.0f} analytic, "
            f"{m['flops_per_token']:,.0f} counted (ratio {m.get('flop_count_ratio', float('nan')):.3f})"
            f"{memory}")
