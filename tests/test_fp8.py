"""Float8 training as a precision (torchao, emulated on this CPU): each recipe's
conversion, the filter's decisions at GPT-2's own shapes, the loss against bf16's by a
bound a wrong scale fails, the A/B's verdict on recorded timings, an emulated row that
publishes no speed, FSDP2 on 2 gloo ranks with float8 all-gather on and off, and what is
refused in one line."""

import copy
import os
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from benchlib.analysis import transformer_training as lm_analysis
from benchlib.cli import main
from benchlib.config import CompileConfig, TransformerTrainingConfig
from benchlib.config.fp8_layers import Fp8LayersConfig
from benchlib.core import gpt
from benchlib.core.loops import Objective
from benchlib.core.metrics import fp8_weighted_peak, mfu, mfu_fp8_weighted
from benchlib.errors import ConfigError
from benchlib.launch.launcher import launch
from benchlib.studies import fp8 as fp8_ab
from benchlib.studies import transformer_training
from benchlib.trainers import ddp_flags, fp8, fp8_layers

# gpt-tiny at its smallest: every linear a multiple of 16 (qkv 64x192, proj 64x64, fc
# 64x256, fc_proj 256x64, head 64x256 tied to the token embedding)
TINY_ARGS = {"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 256}
TINY = dict(model="gpt-tiny", model_args=TINY_ARGS, dataset="tokens", seq_len=32, batch_size=2,
            max_steps=6, warmup_steps=1, lr=0.05, device="cpu")


def tiny_model(seed: int = 0) -> gpt.GPT:
    torch.manual_seed(seed)
    return gpt.build("gpt-tiny", TINY_ARGS)


def rows_of(model, rows: int) -> dict[str, int]:
    return {name: rows for name, _ in fp8.linears(model)}


@pytest.mark.parametrize("precision", ["fp8_tensorwise", "fp8_rowwise", "fp8_rowwise_gw_hp"])
def test_each_recipe_converts_the_linears_its_filter_names_and_says_so(precision):
    """Every linear but those named; torchao's Float8Linear in the recipe, emulated here, and
    the record's counts are the model's own."""
    model = tiny_model()
    converted = fp8.convert(model, precision, "head,fc_proj", "cpu", rows_of(model, 64))
    assert fp8.converted_count(model) == 3
    figures = converted.figures(flops_per_step=None)
    assert (figures["fp8_converted"], figures["fp8_kept"]) == (3, 2)
    assert figures["fp8"] == "emulated" and figures["fp8_why"].startswith(
        f"{precision} emulated: the CPU has no FP8 GEMMs")
    assert figures["fp8_recipe"] == {"fp8_tensorwise": "tensorwise", "fp8_rowwise": "rowwise",
                                     "fp8_rowwise_gw_hp": "rowwise_with_gw_hp"}[precision]
    kept = {layer.name: layer.reason for layer in converted.layers if not layer.convert}
    assert kept == {"blocks.0.fc_proj": "named in fp8_filter (fc_proj)",
                    "head": "named in fp8_filter (head)"}
    assert model.head.weight is model.wte.weight  # kept in bf16: still tied
    x = torch.randint(0, 256, (2, 32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1).float(), x.flatten())
    loss.backward()  # every recipe's backward, rowwise_with_gw_hp's bf16 gradient included
    assert model.blocks[0].attn.qkv.weight.grad is not None


# GPT-2 small's linears at batch 8 x 1,024 tokens (M x K x N), each block's four and the
# head (50,257 outputs: no FP8 GEMM takes them)
GPT2_ROWS = 8 * 1024
MEASURED = {"path": "a fixed table", "fp8_why": None, "shapes": {
    "8192x768x2304": {"speedup": 1.31, "low": 1.22, "high": 1.40, "pays": True},
    "8192x768x768": {"speedup": 0.93, "low": 0.88, "high": 0.99, "pays": False},
    "8192x768x3072": {"speedup": 1.27, "low": 1.18, "high": 1.35, "pays": True},
    "8192x3072x768": {"speedup": 1.12, "low": 1.04, "high": 1.19, "pays": True}}}


def decisions(precision: str, fp8_filter: str, table=None) -> dict[str, bool]:
    with torch.device("meta"):
        model = gpt.build("gpt2-124m")
    layers = fp8.plan(model, precision, fp8_filter, rows_of(model, GPT2_ROWS), table=table)
    return {layer.name.replace("blocks.0.", ""): layer.convert for layer in layers
            if layer.name.startswith("blocks.0.") or layer.name == "head"}


def test_the_filters_decide_gpt2_124ms_linears_at_its_own_shapes():
    """torchao's static filter (H100 thresholds): tensorwise converts qkv and fc, rowwise
    none of them; the measured table converts where FP8 paid, fc_proj too, and keeps the
    attention projection that did not; the head is never FP8's (50,257 outputs)."""
    assert decisions("fp8_tensorwise", "auto") == {
        "attn.qkv": True, "attn.proj": False, "fc": True, "fc_proj": False, "head": False}
    assert not any(decisions("fp8_rowwise", "auto").values())
    measured = decisions("fp8_tensorwise", "measured", MEASURED)
    assert measured == {"attn.qkv": True, "attn.proj": False, "fc": True, "fc_proj": True,
                        "head": False}
    with torch.device("meta"):
        model = gpt.build("gpt2-124m")
    layers = fp8.plan(model, "fp8_tensorwise", "measured", rows_of(model, GPT2_ROWS),
                      table=MEASURED)
    reasons = {layer.name: layer.reason for layer in layers}
    assert reasons["blocks.3.attn.proj"] == ("measured x0.93 (95% CI 0.88-0.99): does not pay, "
                                             "kept in bf16")
    assert reasons["head"] == "768 in x 50257 out: FP8 GEMMs need both multiples of 16"
    differs = {layer.name for layer in layers if layer.auto != layer.convert}
    assert differs == {f"blocks.{i}.fc_proj" for i in range(12)}  # torchao keeps what paid
    assert decisions("fp8_rowwise_gw_hp", "none")["attn.proj"]  # none: every linear it can


def test_measured_refuses_a_table_without_the_shape_or_measured_emulated():
    short = {**MEASURED, "shapes": {k: v for k, v in MEASURED["shapes"].items()
                                    if k != "8192x3072x768"}}
    with pytest.raises(ConfigError, match=r"^fp8_filter: measured: a fixed table has no row for "
                       r"blocks.0.fc_proj \(8192x3072x768, M x K x N\)"):
        decisions("fp8_tensorwise", "measured", short)
    emulated = {**MEASURED, "fp8_why": "fp8_tensorwise emulated: the CPU has no FP8 GEMMs",
                "shapes": {k: {**v, "pays": None} for k, v in MEASURED["shapes"].items()}}
    with pytest.raises(ConfigError, match="was measured emulated .* it decides nothing"):
        decisions("fp8_tensorwise", "measured", emulated)


def test_float8_all_gather_keeps_a_tied_weight_in_bf16():
    """torchao wraps a gathered weight in a parameter of its own: GPT's head, tied to the
    token embedding, stays in bf16 (without all-gather it converts, still tied)."""
    model = gpt.build("gpt-tiny")  # head 128 x 2,048: a shape FP8 takes
    layers = {x.name: x for x in fp8.plan(model, "fp8_tensorwise", "none",
                                          rows_of(model, 64), all_gather=True)}
    assert not layers["head"].convert
    assert layers["head"].reason.startswith("weight shared with wte: float8 all-gather")
    assert fp8.plan(model, "fp8_tensorwise", "none", rows_of(model, 64))[-1].convert


def test_a_shape_pays_only_where_its_interval_clears_one_and_an_emulated_one_is_not_judged():
    bf16 = [1e-3 * (1 + 0.01 * (r % 3)) for r in range(10)]
    faster = fp8_layers.judged({"bf16": bf16, "fp8": [t / 1.25 for t in bf16]}, None)
    assert faster["pays"] and faster["decision"] == "fp8" and faster["low"] > 1
    assert faster["speedup"] == pytest.approx(1.25)
    same = fp8_layers.judged({"bf16": bf16, "fp8": list(reversed(bf16))}, None)
    assert not same["pays"] and same["decision"] == "keep in bf16" and same["low"] <= 1
    emulated = fp8_layers.judged({"bf16": bf16, "fp8": bf16}, "emulated here")
    assert emulated["pays"] is None and emulated["speedup"] is None and emulated["fp8_ms"] is None
    assert emulated["decision"] == "not judged: emulated"


def train_losses(model, steps: int = 8) -> float:
    """The loss after `steps` SGD steps on one batch of token ids, in bf16 autocast."""
    x = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = Objective()(model, x, y)
        loss.backward()
        optimizer.step()
    return loss.item()


def test_emulated_fp8_learns_what_bf16_learns_and_a_wrong_scale_fails_the_bound(monkeypatch):
    """The loss after 8 steps on the same seed within 2% of bf16's (FP8's rounding moves it
    about 0.1%); a conversion whose output is 10% off moves it by several percent, and the
    same bound says `differs`."""
    from torchao.float8.float8_linear import Float8Linear

    base = tiny_model()
    bf16 = train_losses(copy.deepcopy(base))
    assert bf16 < 0.8 * train_losses(copy.deepcopy(base), steps=1)  # it learns
    model = copy.deepcopy(base)
    fp8.convert(model, "fp8_tensorwise", "none", "cpu", rows_of(model, 64))
    parity = fp8_ab.loss_parity([bf16], [train_losses(model)])
    assert parity["fp8_loss_parity"] == "same" and abs(parity["fp8_loss_rel_delta_max"]) < 0.01
    right = Float8Linear.forward
    monkeypatch.setattr(Float8Linear, "forward", lambda self, x: right(self, x) * 1.1)
    broken = copy.deepcopy(base)
    fp8.convert(broken, "fp8_tensorwise", "none", "cpu", rows_of(broken, 64))
    wrong = fp8_ab.loss_parity([bf16], [train_losses(broken)])
    assert wrong["fp8_loss_parity"] == "differs" and abs(wrong["fp8_loss_rel_delta_max"]) > 0.02


def launches_of(rates: list[float], seed0: int = 0) -> list[dict]:
    return [{"seed": seed0 + i, "samples_per_s": r, "step_s": 8 / r, "loss_last": 3.0,
             "peak_bytes": 2**30, "compile_s": 40.0} for i, r in enumerate(rates)]


def test_the_ab_names_a_direction_only_from_five_launches_a_side_by_the_one_rule():
    bf16 = [100.0, 103.0, 98.0, 101.0, 99.5]
    faster = fp8_ab.ab_figures(launches_of(bf16), launches_of([1.3 * r for r in bf16]))
    assert faster["fp8_speedup"] == pytest.approx(1.3) and faster["fp8_launches"] == 5
    assert faster["fp8_speedup_verdict"] == "faster" and faster["fp8_speedup_ci95_low"] > 1.1
    assert faster["step_s"] == pytest.approx(faster["bf16_step_s"] / 1.3, rel=0.02)
    assert (faster["compile_s"], faster["bf16_compile_s"]) == (40.0, 40.0)  # apart from the step
    assert faster["fp8_loss_parity"] == "same" and faster["fp8_peak_mem_ratio"] == 1.0
    same = fp8_ab.ab_figures(launches_of(bf16), launches_of(list(reversed(bf16))))
    assert same["fp8_speedup_verdict"] == "no change"
    three = fp8_ab.ab_figures(launches_of(bf16[:3]), launches_of([1.3 * r for r in bf16[:3]]))
    assert three["fp8_speedup_verdict"] == "inconclusive" and three["fp8_speedup_ci95_low"] is None
    m = {**three, "fp8_launches": 3, "tokens_per_sample": 1024, "fp8_converted": 36,
         "fp8_kept": 13, "fp8_loss_parity": "same", "fp8_loss_tolerance": 0.02, "fp8": "native"}
    assert fp8_ab.sentence(m, "gpt2-350m", "fp8_tensorwise") == (
        "fp8_tensorwise x1.30 (range 1.24-1.37, n=3 launches a side: inconclusive) over bf16 "
        "for gpt2-350m at 1,024 tokens, loss same (within 2% of bf16's); 36 linears in FP8, "
        "13 kept in bf16")


def test_a_float8_runs_mfu_is_over_the_dense_bf16_peak_and_over_its_fp8_weighted_one():
    value, source = mfu(1000.0, 1, 494.7e9, "NVIDIA H100 80GB HBM3", "fp8_tensorwise")
    assert value == pytest.approx(0.5) and source.startswith("the dense amp_bf16 peak: NVIDIA H100")
    peak, said = fp8_weighted_peak("NVIDIA H100 80GB HBM3", 0.6)
    assert peak == pytest.approx(1 / (0.6 / 1978.9e12 + 0.4 / 989.4e12))
    assert said.startswith("60% of the FLOPs at the dense FP8 peak (NVIDIA H100 data sheet")
    weighted = mfu_fp8_weighted(0.5, "NVIDIA H100 80GB HBM3", 0.6)
    assert weighted["mfu_fp8_weighted"] == pytest.approx(0.5 * 989.4e12 / peak)
    assert mfu_fp8_weighted(0.5, "NVIDIA A100-SXM4-80GB", 0.6) == {
        "mfu_fp8_weighted": None,
        "mfu_fp8_weighted_peak_source": "no published FP8 and bf16 peaks for NVIDIA A100-SXM4-80GB"}


@pytest.fixture(scope="module")
def emulated_row(tmp_path_factory):
    """Notebook 50's float8 row on this CPU: FSDP2 on 2 gloo ranks, fp8_tensorwise with the
    head kept in bf16 by name, float8 all-gather off; one launch a side, bf16 and FP8."""
    out = tmp_path_factory.mktemp("outputs")
    before = os.environ.get("BENCHLIB_OUTPUTS")
    os.environ["BENCHLIB_OUTPUTS"] = str(out)
    try:
        cfg = TransformerTrainingConfig(**TINY, strategy="fsdp2", launcher="tcp",
                                        nproc_per_node=2, precision="fp8_tensorwise",
                                        fp8_filter="head", repeats=1)
        yield cfg, transformer_training.run(cfg, "fp8-emulated")
    finally:
        os.environ.pop("BENCHLIB_OUTPUTS") if before is None else \
            os.environ.update(BENCHLIB_OUTPUTS=before)


@pytest.mark.distributed
def test_an_emulated_row_publishes_no_speed_and_one_line_says_why(emulated_row):
    cfg, result = emulated_row
    m, details = result.metrics, result.details
    assert m["fp8"] == "emulated" and m["speed_withheld"] == m["fp8_why"] == (
        "fp8_tensorwise emulated: the CPU has no FP8 GEMMs, so no speed, MFU or verdict is "
        "drawn from this run")
    speed = {"samples_per_s", "samples_per_s_p10", "tokens_per_s", "tokens_per_s_p90", "mfu",
             "mfu_peak_source", "mfu_fp8_weighted", "fp8_speedup", "fp8_speedup_ci95_low",
             "fp8_speedup_verdict", "step_s", "bf16_step_s", "bf16_samples_per_s",
             "tokens_per_s_per_device"}
    assert not speed & set(m) and m["tokens_per_sample"] == 32  # what a sample is, kept
    assert all("samples_per_s" not in e and "epoch_samples_per_s" not in e
               for e in details["epochs"] + details["launches"] + details["fp8_ab"]["fp8"])
    assert "epoch_samples_per_s" not in m and details["fp8_ab"]["bf16"][0]["loss_last"] > 0
    assert (m["fp8_converted"], m["fp8_kept"]) == (4, 1) and m["world_size"] == 2
    assert [x["reason"] for x in details["fp8_layers"] if not x["convert"]] == [
        "named in fp8_filter (head)"]
    assert [x["shape"] for x in details["fp8_layers"]][0] == "64x64x192"  # a rank's batch
    # the correctness it did check: FP8's loss against bf16's on the same seed
    assert m["fp8_loss_parity"] == "same" and abs(m["fp8_loss_rel_delta_max"]) < 0.02
    assert m["peak_bytes"] > 0 and m["bf16_peak_bytes"] > 0
    line = transformer_training.describe(cfg, result)
    assert line.startswith("fp8_tensorwise for gpt-tiny at 32 tokens: no speed (fp8_tensorwise "
                           "emulated: the CPU has no FP8 GEMMs") and "loss same" in line
    run = pd.Series({**m, "run_id": "r1", "precision": cfg.precision, "model": cfg.model,
                     "strategy": "fsdp2", "world_size": 2, "ac": "none", "compile": "off"})
    claim = lm_analysis.fp8_claim(run)
    assert claim.figure is None and claim.text().startswith(
        "fp8_tensorwise over bf16 for gpt-tiny at 32 tokens, fsdp2 on 2 ranks, on ")
    assert "no speed: fp8_tensorwise emulated" in claim.text()
    assert [c.figure for c in lm_analysis.headline(pd.DataFrame([run]))[0]] == [None]


@pytest.mark.distributed
def test_notebook_90_and_the_landing_page_read_emulated_rows_without_a_speed(emulated_row,
                                                                             tmp_path):
    """Two emulated records of the same work, FSDP2 and DDP: the analysis' table, sentences,
    figure and headline are drawn without a speed, and none is compared."""
    from benchlib.core import envinfo
    from benchlib.records import results

    cfg, result = emulated_row
    for strategy in ("fsdp2", "ddp"):
        results.write_record(tmp_path, results.make_record(
            run_id=strategy, table="fp8", notebook="50_transformer_training.ipynb",
            params={**cfg.as_dict(), "strategy": strategy}, env=envinfo.collect(),
            started_at=results.now(), status="ok", metrics=result.metrics,
            details=result.details))
    df = results.load_results(tmp_path)
    runs = lm_analysis.runs(df)
    assert len(runs) == 2 and runs["tokens_per_s"].isna().all()
    assert list(lm_analysis.table(runs)["fp8"]) == ["emulated", "emulated"]
    said = lm_analysis.conclusions(runs)
    assert "FSDP2 on" not in said and said.count("no speed: fp8_tensorwise emulated") == 2
    assert lm_analysis.figure(SimpleNamespace(df=df)) is None  # no speed: nothing to draw
    claims, _ = lm_analysis.headline(runs)
    assert [c.figure for c in claims] == [None, None]


def test_notebooks_40_and_55s_analyses_take_no_emulated_row_into_a_table_of_speeds():
    from benchlib.analysis import compile as compile_analysis
    from benchlib.analysis import framework_comparison

    row = {"status": "ok", "fp8": "emulated", "batch_size": 2, "model": "gpt-tiny",
           "nproc_per_node": 1, "image_size": 32}
    df = pd.DataFrame([{**row, "study": "compile"}, {**row, "study": "framework_comparison"}])
    assert compile_analysis.runs(df).empty and framework_comparison.runs(df).empty


def test_a_native_rows_claim_is_its_ab_by_the_one_rule_with_its_loss_and_layers():
    run = pd.Series({"run_id": "r9", "precision": "fp8_tensorwise", "model": "gpt2-350m",
                     "tokens_per_sample": 1024, "strategy": "single", "world_size": 1,
                     "ac": "none", "compile": "regional", "device_name": "NVIDIA H100 80GB HBM3",
                     "fp8": "native", "fp8_speedup": 1.18, "fp8_speedup_ci95_low": 1.12,
                     "fp8_speedup_ci95_high": 1.25, "fp8_launches": 5,
                     "fp8_speedup_verdict": "faster", "fp8_loss_parity": "same",
                     "fp8_loss_tolerance": 0.02, "fp8_converted": 48, "fp8_kept": 49,
                     "mfu": 0.41, "mfu_fp8_weighted": 0.29})
    assert lm_analysis.fp8_claim(run).text() == (
        "fp8_tensorwise: x1.18 over bf16 for gpt2-350m at 1,024 tokens, single compiled "
        "(regional), on NVIDIA H100 80GB HBM3 (95% CI 1.12-1.25, n=5 launches a side: faster); "
        "loss same (within 2% of bf16's on the same seeds); 48 linears in FP8, 49 kept in bf16; "
        "MFU 41.0% of the dense bf16 peak; 29.0% of the FP8-weighted peak")


@pytest.mark.distributed
def test_fsdp2_gathers_float8_weights_on_two_gloo_ranks_and_learns_what_it_learns_without(
        emulated_row, tmp_path):
    """The same row's FP8 launch with float8 all-gather on: every converted weight is
    torchao's float8 wrapper, and the loss after the same steps is the all-gather-off
    launch's within 0.2% (the tensorwise scale is the whole weight's either way; off, the
    weight is gathered in bf16 and rounded to FP8 after, on it is rounded from fp32 once:
    2e-4 apart here, where a wrong scale moves it by percents)."""
    cfg, result = emulated_row
    [planned] = [x for x in transformer_training.launches(cfg) if x.role == "fp8"]
    on = launch("fsdp2", {**planned.params, "fp8_all_gather": True}, tmp_path, "tcp", 2,
                timeout_s=300).result["metrics"]
    assert on["fp8_all_gather_weights"] == on["fp8_converted"] == 4
    assert result.metrics["fp8_all_gather_weights"] == 0
    assert on["loss_last"] == pytest.approx(result.metrics["loss_last"], rel=2e-3)


def test_the_per_layer_table_on_this_cpu_is_emulated_and_kept_where_measured_looks(
        outputs, capsys):
    code = main(["fp8-layers", "gpt-tiny", "--model-args", '{"n_layer": 1, "n_embd": 64, '
                 '"n_head": 2, "vocab_size": 256}', "--batch-size", "2", "--seq-len", "32",
                 "--device", "cpu", "--no-compile", "--rounds", "5", "--iters", "1",
                 "--outputs", str(outputs)])
    printed = capsys.readouterr().out.splitlines()
    assert code == 0
    assert printed[0].startswith("gpt-tiny at batch 2, 32 tokens, fp8_tensorwise on ")
    assert printed[0].endswith("(eager; emulated)")
    shapes = [line.split()[0] for line in printed[2:6]]
    assert shapes == ["64x64x192", "64x64x64", "64x64x256", "64x256x64"]  # fc and head: 1 shape
    assert all(line.endswith("bf16     not judged: emulated") for line in printed[2:6])
    kept = fp8.table_file("gpt-tiny", TINY_ARGS, 2, 32, "fp8_tensorwise",
                          printed[0].split(" on ")[1].split(" (")[0])
    assert printed[-1] == f"table: {kept} (fp8_filter: measured reads it)"
    table = fp8.load_table(kept)
    assert table["shapes"]["64x64x256"]["layers"] == ["blocks.0.fc", "head"]
    assert table["shapes"]["64x64x256"]["pays"] is None and table["fp8"] == "emulated"


@pytest.mark.parametrize("build, line", [
    (lambda: TransformerTrainingConfig(precision="fp8_blockwise"),
     "precision: 'fp8_blockwise' is not one of fp32, tf32, amp_bf16, amp_fp16, fp8_tensorwise, "
     "fp8_rowwise, fp8_rowwise_gw_hp"),
    (lambda: TransformerTrainingConfig(precision="fp8_rowwise_gw_hp"),
     "fp8_filter: auto is torchao's static filter, which has no rule for fp8_rowwise_gw_hp"),
    (lambda: TransformerTrainingConfig(precision="fp8_rowwise", fp8_all_gather=True),
     "fp8_all_gather: torchao gathers float8 weights with the tensorwise recipe only"),
    (lambda: TransformerTrainingConfig(precision="fp8_tensorwise", fp8_all_gather=True,
                                       strategy="ddp"),
     "fp8_all_gather: is FSDP2's all-gather; strategy is ddp"),
    (lambda: TransformerTrainingConfig(precision="amp_bf16", fp8_filter="none"),
     "fp8_filter: is float8 training's; precision is amp_bf16"),
    (lambda: CompileConfig(precision="fp8_tensorwise", fp8_filter="blocks.0 fc"),
     "fp8_filter: 'blocks.0 fc' is not one of auto, measured, none, nor module names"),
    (lambda: ddp_flags.check_args(ddp_flags.parser("dp").parse_args(
        ["--precision", "fp8_tensorwise"])),
     "precision: fp8_tensorwise trains single, ddp or fsdp2"),
])
def test_bad_fp8_settings_are_one_line_naming_the_field(build, line):
    with pytest.raises(ConfigError) as caught:
        build()
    assert str(caught.value).startswith(line)


def test_a_model_without_linear_layers_or_a_measured_filter_on_a_cpu_ends_in_the_preflight(
        capsys):
    """One line naming `precision`, exit 2, before any rank starts: float8 training
    converts nn.Linear only; and a measured filter on a CPU, whose table decides nothing."""
    own = dict(model="tests.fp8_models:convnet", dataset="synthetic", input_shape="3x8x8",
               seq_len=0, device="cpu", precision="fp8_tensorwise")
    with pytest.raises(ConfigError, match=r"^precision: fp8_tensorwise converts nn.Linear "
                       "layers, and Sequential has none; use amp_bf16$"):
        transformer_training.preflight(TransformerTrainingConfig(**own, strategy="single",
                                                                 nproc_per_node=1))
    assert main(["fp8-layers", "tests.fp8_models:convnet", "--dataset", "synthetic",
                 "--input-shape", "3x8x8", "--device", "cpu", "--no-compile"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "benchlib fp8-layers: precision: fp8_tensorwise converts nn.Linear layers, and "
        "Sequential has none; use amp_bf16"]
    with pytest.raises(ConfigError, match="^fp8_filter: measured: on a CPU the per-layer"):
        transformer_training.preflight(TransformerTrainingConfig(
            **{**TINY, "max_steps": 20}, strategy="single", nproc_per_node=1,
            precision="fp8_tensorwise", fp8_filter="measured"))


def test_the_cli_refuses_an_unknown_recipe_naming_precision(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["fp8-layers", "gpt-tiny", "--precision", "fp8_blockwise"])
    assert caught.value.code == 2
    assert "argument --precision: invalid choice: 'fp8_blockwise'" in capsys.readouterr().err
    assert Fp8LayersConfig().precision == "fp8_tensorwise"


def test_an_fp8_rows_ab_interleaves_bf16_twins_on_the_same_seeds():
    cfg = TransformerTrainingConfig(**TINY, strategy="single", nproc_per_node=1,
                                    precision="fp8_rowwise", fp8_filter="none", repeats=3)
    planned = transformer_training.launches(cfg)
    assert [(x.role, x.repeat) for x in planned] == [
        ("bf16", 0), ("fp8", 0), ("fp8", 1), ("bf16", 1), ("bf16", 2), ("fp8", 2)]
    for x in planned:
        assert x.params["seed"] == cfg.seed + x.repeat
        want = ("amp_bf16", "auto") if x.role == "bf16" else ("fp8_rowwise", "none")
        assert (x.params["precision"], x.params["fp8_filter"]) == want
