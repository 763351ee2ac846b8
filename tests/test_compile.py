"""torch.compile: its modes as parameters (the old switch still read), the break-even and
loss-parity arithmetic, and notebook 55 run for real on inductor's CPU backend: a tiny
model with a graph break put in on purpose (its reason and line in the record), cold
against warm in separate processes (the cache misses, then hits); the analysis, `compare`
telling a compile-time regression from a steady-state one, diagnose's advice and the GPU
check's compile steps.

The compiled launches are shared by the module (one `benchlib run` of notebook 55: a
priming launch, an eager and a warm one), and the models have no bias and no activation,
so inductor builds no C++ kernel for them (a gcc build per kernel costs seconds here)."""

import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import ROOT

from benchlib.analysis import compile as analysis
from benchlib.analysis.sections import Records
from benchlib.cli import main
from benchlib.compare import changes, view
from benchlib.config import CompileConfig, FrameworkComparisonConfig, TransformerTrainingConfig
from benchlib.core import compile_cost, compiler
from benchlib.diagnose import rules
from benchlib.errors import ConfigError
from benchlib.records import results, testbed
from benchlib.studies import calibrate_lm, checks
from benchlib.studies import compile as study

BREAK_LINE = next(i for i, line in enumerate(
    (ROOT / "tests" / "compile_models.py").read_text().splitlines(), start=1) if "BREAK HERE" in line)
TINY = ["-p", "image_size", "8", "-p", "batch_size", "8", "-p", "max_steps", "6",
        "-p", "warmup_steps", "2", "-p", "device", "cpu"]


# ------------------------------------------------------------------ parameters

def test_the_old_switch_is_read_as_a_mode_with_a_note():
    row, notes = TransformerTrainingConfig.read_old_names({"compile": True, "model": "gpt-tiny"})
    assert row["compile"] == "default"
    assert notes == ["compile: true is an old value; read as default (write compile: default)"]
    assert FrameworkComparisonConfig.read_old_names({"compile": False})[0] == {"compile": "off"}
    assert TransformerTrainingConfig(compile=True).compile == "default"  # code and notebooks
    assert TransformerTrainingConfig.read_old_names({"compile": 1})[0] == {"compile": 1}
    with pytest.raises(ConfigError, match="compile: expected str, got int 1"):
        TransformerTrainingConfig(compile=1)
    from benchlib.trainers.ddp_flags import parser

    worker = parser("single")
    assert worker.parse_args(["--compile"]).compile == "default"  # as the switch was typed
    assert worker.parse_args([]).compile == "off"
    assert worker.parse_args(["--compile", "regional"]).compile == "regional"


@pytest.mark.parametrize("params, message", [
    ({"compile": "reduce-overhead", "device": "cpu"},
     "compile: reduce-overhead replays CUDA graphs, which need a GPU; on the CPU use one of "
     "off, default, max-autotune, regional"),
    ({"compile": "off"}, "compile: off compares eager with itself"),
    ({"compile_cache": "warm", "compile": "off"}, "compile"),
])
def test_a_compile_the_study_cannot_run_is_refused_naming_the_field(params, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        CompileConfig(**params)


def test_reduce_overhead_on_the_cpu_is_refused_in_one_line_before_torch():
    proc = subprocess.run([sys.executable, "-m", "benchlib.workers.single", "--device", "cpu",
                           "--compile", "reduce-overhead"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "benchlib.workers.single: compile: reduce-overhead replays CUDA graphs, which need a GPU; "
        "on the CPU "
        "use one of off, default, max-autotune, regional"]


def test_regional_needs_blocks_and_compiles_each_one_in_place():
    cfg = CompileConfig(model="tests.compile_models:small", compile="regional", device="cpu",
                        image_size=8)
    with pytest.raises(ConfigError, match="compile: regional works block by block, and Small "
                       "has no blocks"):
        checks.blocks_fit(cfg, checks.own_job(cfg))
    from benchlib.trainers.ddp import wrap
    from tests.compile_models import Blocks

    names = set(Blocks().state_dict())
    wrapped, _ = wrap(Blocks(), "single", torch.device("cpu"), compile="regional")
    assert all(b._compiled_call_impl is not None for b in wrapped.blocks)  # compiled on first call
    assert set(wrapped.state_dict()) == names  # in place: a checkpoint's names are the model's
    assert compiler.whole(wrapped, "regional") is wrapped  # the step calls the model itself


# ------------------------------------------------------------------ the arithmetic

def test_break_even_is_compile_seconds_over_the_steady_saving_with_its_interval():
    rng = np.random.default_rng(0)
    # batch 8: eager 400 samples/s (a 20 ms step), compiled 800 (10 ms); 2 s of compile
    eager = [(0.10 + 0.001 * rng.standard_normal(), 400 * (1 + 0.01 * rng.standard_normal()))
             for _ in range(5)]
    comp = [(2.10 + 0.02 * rng.standard_normal(), 800 * (1 + 0.01 * rng.standard_normal()))
            for _ in range(5)]
    be = compile_cost.break_even(comp, eager, batch=8)
    assert be.compile_s == pytest.approx(2.0, rel=0.05)
    assert be.saved_s == pytest.approx(0.010, rel=0.05)
    assert be.steps == pytest.approx(be.compile_s / be.saved_s) == pytest.approx(200, rel=0.1)
    assert be.low < be.steps < be.high < 250 and be.n == 5
    assert compile_cost.break_even_text(be.steps, be.low, be.high, be.n, "faster").startswith(
        f"pays off after {be.steps:,.0f} steps (95% CI {be.low:,.0f} to {be.high:,.0f}, n=5")
    slower = compile_cost.break_even([(2.1, 300.0)] * 5, eager, batch=8)
    assert math.isinf(slower.steps) and math.isinf(slower.low)
    assert compile_cost.break_even_text(slower.steps, slower.low, slower.high, 5,
                                        "slower").startswith(
        "never pays off: the compiled step is slower")
    # as fast, give or take: some resamples never pay off, so the interval reaches "never"
    level = compile_cost.break_even([(2.1, 400 * (1 + 0.02 * rng.standard_normal())) for _ in range(5)],
                             eager, batch=8)
    assert math.isinf(level.high)
    assert "to never" in compile_cost.break_even_text(level.steps, level.low, level.high, 5,
                                                      "inconclusive")
    few = compile_cost.break_even(comp[:2], eager[:2], batch=8)
    assert few.low is None and "n=2 launches a side: an interval needs 5" in \
        compile_cost.break_even_text(few.steps, few.low, few.high, 2, "inconclusive")
    cheap = compile_cost.break_even([(0.05, 800.0)] * 5, eager, batch=8)  # a compile that cost nothing
    assert cheap.steps == 0


@pytest.mark.parametrize("steps, low, high, verdict, says", [
    # the issue's: "never pays off: the compiled step is not faster" beside x0.74 (0.38-1.70)
    (math.inf, 243.0, math.inf, "inconclusive", "not settled: 243 steps to never"),
    # and "11 steps" for x6.15 (0.86-16.53): a point the interval does not support
    (11.0, 2.0, math.inf, "inconclusive", "not settled: 2 steps to never"),
    (11.0, None, None, "inconclusive", "not settled: 11 steps at the medians, but n=3"),
    (math.inf, math.inf, math.inf, "no change", "does not pay off: the compiled step is no "
     "faster"),
    (195.0, 175.0, 216.0, "faster", "pays off after 195 steps (95% CI 175 to 216"),
])
def test_a_break_even_names_a_direction_only_where_the_speedups_verdict_does(
        steps, low, high, verdict, says):
    text = compile_cost.break_even_text(steps, low, high, 3 if low is None else 5, verdict)
    assert text.startswith(says), text
    if verdict == "inconclusive":
        assert "pays off after" not in text and "never pays off" not in text


def test_a_record_reads_never_back_from_its_nulls():
    stored = {"break_even_steps": None, "break_even_low": 900.0, "break_even_high": None,
              "break_even_n": 5}
    assert study.break_even_of(stored) == (math.inf, 900.0, math.inf, 5)
    assert study.break_even_of({**stored, "break_even_steps": 120.0, "break_even_n": 2,
                                "break_even_low": None}) == (120.0, None, None, 2)


def test_loss_parity_is_judged_pair_by_pair_on_the_same_seed_within_a_stated_tolerance():
    """The issue's case: simplecnn's eager losses over 3 seeds spread 2.0-2.6, so a compiled
    loss 14% off its own seed's read "same" against that spread; judged against eager on
    the same seed within 1%, it differs. Float rounding stays same; one pair is judged."""
    eager = [2.0, 2.3, 2.6]
    off = compile_cost.loss_parity(eager, [2.0 * 1.14, 2.3, 2.6])
    assert off["loss_parity"] == "differs" and off["loss_delta_relative_max"] == pytest.approx(0.14)
    same = compile_cost.loss_parity(eager, [2.0 + 1e-6, 2.3 - 2e-6, 2.6])
    assert same["loss_parity"] == "same" and same["loss_tolerance"] == 0.01
    assert compile_cost.loss_parity([2.3], [2.3 * 1.02])["loss_parity"] == "differs"
    assert compile_cost.loss_parity([2.3], [2.3])["loss_parity"] == "same"
    assert compile_cost.loss_parity([], [])["loss_parity"] == "not judged"


# ------------------------------------------------------------------ notebook 55, for real

@pytest.fixture(scope="module")
def warm_run(tmp_path_factory):
    """One row of notebook 55 through `benchlib run`: the tiny model of blocks with a graph
    break, compile regional (each block on its own), warm: a priming launch (cold, keeps its
    cache), an eager launch and a warm launch (a copy of that cache), each a process of its
    own."""
    out = tmp_path_factory.mktemp("outputs")
    saved = {k: os.environ.get(k) for k in ("BENCHLIB_OUTPUTS", "TORCHINDUCTOR_COMPILE_THREADS")}
    # compile in the worker's own process: a pool of compile processes would each import torch
    os.environ.update(BENCHLIB_OUTPUTS=str(out), TORCHINDUCTOR_COMPILE_THREADS="1")
    try:
        code = main(["run", "55_compile", "-p", "model", "tests.compile_models:blocks_with_break",
                     *TINY, "-p", "compile", "regional", "-p", "compile_cache", "warm",
                     "-p", "repeats", "1", "--table", "compile_test"])
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    [path] = (out / "results" / "compile_test").glob("*.json")
    return code, results.read_record(path), out


def test_the_record_names_the_graph_break_with_its_reason_and_line(warm_run):
    code, rec, _ = warm_run
    assert code == 0 and rec["status"] == "ok" and rec["study"] == "compile"
    m, d = rec["metrics"], rec["details"]
    # one break, inside block 2: its graph, block 2's rest and block 3 (the caller's rest)
    assert (m["graph_breaks"], m["graphs"], m["model_params"]) == (1, 3, 3488)
    [brk] = d["graph_break_reasons"]
    assert "graph_break()" in brk["reason"]
    assert brk["file"] == str(ROOT / "tests" / "compile_models.py") and brk["line"] == BREAK_LINE
    assert brk["code"].startswith("torch._dynamo.graph_break()")
    # regional: one compiled function (Module._call_impl) for all three blocks, so each block
    # after the first is a recompile, its guard named: block 2's input needs a gradient
    # (the images did not), block 3's weight is another shape
    assert m["recompiles"] == 2 and m["compiled_frames"] == 4
    first, second = d["recompile_reasons"]
    assert "requires_grad mismatch" in first and "size mismatch" in second


def test_cold_and_warm_are_separate_processes_and_the_warm_one_reads_the_cold_ones_cache(warm_run):
    _, rec, out = warm_run
    m, d = rec["metrics"], rec["details"]
    prime, [warm] = d["priming"], d["launches"]
    assert prime["cache_misses"] > 0 and prime["cache_hits"] == 0  # cold: nothing to read
    assert warm["cache_hits"] > 0 and warm["cache_misses"] == 0  # warm: all of it read
    logs = out / "logs" / rec["run_id"]
    assert (logs / "compile-cache" / "fxgraph").is_dir()  # what the priming launch kept
    banners = [(logs / side / "rank0.log").read_text().splitlines()[0]
               for side in ("prime", "compiled-0", "eager-0")]
    assert len(banners) == 3  # three processes, each its own log and banner
    # the compile's seconds: first steps less eager's; the cold one from the priming launch
    assert m["compile_s"] == pytest.approx(warm["first_s"] - d["eager_launches"][0]["first_s"])
    assert m["cold_compile_s"] == pytest.approx(prime["first_s"] - d["eager_launches"][0]["first_s"])
    assert m["compile_s"] > 0 and m["cold_compile_s"] > 0
    assert len(warm["steps_s"]) == 6 and m["first_steps"] == 2


def test_the_records_break_even_follows_from_its_own_figures(warm_run):
    _, rec, _ = warm_run
    m = rec["metrics"]
    saved = m["eager_step_s"] - m["step_s"]
    assert m["step_s"] == pytest.approx(8 / m["samples_per_s"])
    assert m["speedup"] == pytest.approx(m["samples_per_s"] / m["eager_samples_per_s"])
    if saved > 0:
        assert m["break_even_steps"] == pytest.approx(max(m["compile_s"], 0) / saved)
    else:
        assert m["break_even_steps"] is None
    assert m["break_even_low"] is None and m["speedup_verdict"] == "inconclusive"  # 1 launch
    assert m["pays_off"] == "not settled"  # no direction from 1 launch a side, whatever the point
    # the same seed and data: the compiled loss is eager's, up to float rounding
    assert abs(m["loss_delta"]) < 1e-4 and m["loss_parity"] == "same"
    assert m["compiled_in_warmup"] is True and m["compile_remote_caches_off"] is None


def test_notebook_90s_section_and_the_landing_pages_finding_from_the_record(warm_run):
    _, _, out = warm_run
    records = Records(out / "results")
    runs = analysis.runs(records.df)
    claims, caveat = analysis.headline(runs)
    assert claims[0].subject.startswith("compile regional, warm, "
                                        "tests.compile_models:blocks_with_break")
    assert claims[0].figure.n == "n=1 launch a side" and caveat == ""
    table, text, breaks = analysis.section(records)
    assert list(table["compile_cache"]) == ["warm"]
    assert "steady samples/s no clear difference between compiled (regional) and eager" in text
    assert f"tests/compile_models.py:{BREAK_LINE}" in breaks
    assert analysis.figure(records) is not None


def test_a_compiled_rows_steps_are_judged_by_diagnose_and_the_report(warm_run):
    """The record keeps the first compiled launch's step figures (its timed steps: the
    compile falls in the warm-up), so the report's bottleneck column judges the row."""
    _, rec, _ = warm_run
    m = rec["metrics"]
    assert m["compute_s"] > 0 and m["data_s"] >= 0
    assert m["compute_share_low"] <= m["compute_share"] <= m["compute_share_high"]
    found = rules.diagnose(rec)
    assert rules.column(rec) == found.bottleneck in rules.BOTTLENECKS
    assert any(e.startswith("each step: ") and "computing" in e for e in found.evidence)


@pytest.mark.distributed
def test_a_compiled_row_of_another_study_records_its_compile_cache_breaks_and_no_break_even(
        outputs, monkeypatch):
    """Notebook 40's compiled row on the CPU (one launch, an empty cache): its record says
    what the compile cost by itself (its first steps less as many steady ones: no eager
    launch beside it), from which cache, its graph break and recompiles, and no
    break-even, with the reason. (Warm rows: notebook 55's above, by the same loop.)"""
    from benchlib.studies import framework_comparison

    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no pool of compile processes
    cfg = FrameworkComparisonConfig(
        model="tests.compile_models:blocks_with_break", model_args={"side": 32},
        dataset="synthetic", image_size=32, batch_size=8, device="cpu", compile="default",
        skip_steps=0, warmup_steps=2, timed_steps=4, compare_jax=False)
    result = framework_comparison.run(cfg, "compiled-40")
    m, steps = result.metrics, result.details["steps_s"]
    assert m["compile_cache"] == "cold" and m["cache_misses"] > 0 and m["cache_hits"] == 0
    assert m["compile_s"] == pytest.approx(sum(steps[:2]) - 2 * float(np.median(steps[2:])))
    assert m["compile_s"] > 0
    assert m["compile_s_of"] == "the first 2 step(s) less 2 x the median step after them"
    assert m["graph_breaks"] == 1 and m["recompiles"] >= 0
    assert (m["break_even_steps"], m["break_even_why"]) == (
        None, "no eager row of the same work in this row")


@pytest.mark.parametrize("study, config", [
    ("framework_comparison", FrameworkComparisonConfig(compare_jax=False)),
    ("transformer_training", TransformerTrainingConfig(model="gpt-tiny", dataset="tokens"))])
def test_a_compiled_row_without_an_eager_launch_says_why_it_has_no_break_even(
        monkeypatch, tmp_path, study, config):
    """Notebooks 40 and 50 launch no eager run of a compiled row's work: their compiled
    rows record no break-even and the reason; an eager row records neither."""
    import importlib
    from pathlib import Path

    from benchlib.launch.launcher import LaunchResult
    from benchlib.studies import repeats

    def launch(module, params, log_dir, *a, **kw):
        metrics = {"samples_per_s": 100.0, "world_size": 1, "device_name": "cpu",
                   "device_type": "cpu", "tokens_per_sample": 8, "compile_s": 1.5}
        epoch = {"samples_per_s": 100.0, "epoch_s": 1.0, "batch_s": 0.1}
        return LaunchResult(Path(log_dir), {"metrics": metrics, "details": {"epochs": [epoch]}},
                            1.0)

    module = importlib.import_module(f"benchlib.studies.{study}")
    monkeypatch.setattr(repeats, "launch", launch)
    monkeypatch.setattr(module, "preflight", lambda cfg: None)
    monkeypatch.setenv("BENCHLIB_OUTPUTS", str(tmp_path))
    compiled = module.run(type(config)(**{**config.as_dict(), "compile": "default"})).metrics
    assert (compiled["break_even_steps"], compiled["break_even_why"]) == (
        None, "no eager row of the same work in this row")
    assert "break_even_why" not in module.run(config).metrics


def test_a_launchs_own_compile_seconds_need_a_step_after_the_first_ones():
    assert compile_cost.in_launch([5.0, 1.0, 0.1, 0.1, 0.2], 2) == {
        "compile_s": pytest.approx(5.8),
        "compile_s_of": "the first 2 step(s) less 2 x the median step after them"}
    assert compile_cost.in_launch([5.0, 0.1, 0.1], 0)["compile_s"] == pytest.approx(4.9)
    assert compile_cost.in_launch([5.0, 1.0], 2) == {
        "compile_s": None, "compile_s_of": "not measured: no step after the first 2"}


# ------------------------------------------------------------------ compare, diagnose

def write_compile_set(rdir, label, env, compile_s, samples_per_s, seed):
    """One row of notebook 55 in a result set: 5 compiled launches, as the study records them."""
    rng = np.random.default_rng(seed)
    bed = testbed.from_env(env, commit="c0ffee")
    params = {"model": "gpt-tiny", "compile": "default", "compile_cache": "cold", "batch_size": 8}
    epochs = [{"repeat": r, "samples_per_s": samples_per_s * (1 + 0.01 * rng.standard_normal()),
               "compile_s": compile_s * (1 + 0.01 * rng.standard_normal())} for r in range(5)]
    rec = results.make_record(
        run_id=results.run_id_for("compile_cpu", "nb", params, bed["id"]) + f"-{label}",
        table="compile_cpu", notebook="55_compile.ipynb", params=params, env=env,
        started_at=results.now(), status="ok", label=label, testbed=bed,
        metrics={"samples_per_s": samples_per_s, "compile_s": compile_s},
        details={"epochs": epochs})
    results.write_record(rdir, rec)


ENV = {"hostname": "vm", "cpu_model": "Xeon", "gpus": [], "python": "3.11",
       "packages": {"torch": "2.14.1", "benchlib": "0.1.0"}, "torch_cuda": None,
       "allocator": {"name": "glibc", "glibc_tunables": ""}, "env_vars": {}}
NEW = {**ENV, "packages": {"torch": "2.15.0", "benchlib": "0.1.0"}}


@pytest.mark.parametrize("compile_s, samples_per_s, kind", [
    (30.0, 1000.0, "a compile-time regression"),
    (15.0, 700.0, "a steady-state regression"),
    (30.0, 700.0, "a compile-time and a steady-state regression"),
])
def test_compare_tells_a_compile_time_regression_from_a_steady_state_one(
        outputs, compile_s, samples_per_s, kind):
    rdir = outputs / "results"
    write_compile_set(rdir, "torch-2.14", ENV, 15.0, 1000.0, seed=1)
    write_compile_set(rdir, "torch-2.15", NEW, compile_s, samples_per_s, seed=2)
    c = changes.compare_sets("torch-2.14", "torch-2.15", rdir)
    assert sorted(c.rows["metric"]) == ["compile_s", "samples_per_s"]  # both, unasked
    [said] = view.regression_kinds(c.rows)
    assert said.startswith(f"compile_cpu {c.rows.iloc[0]['row']}: {kind}: compile seconds")
    assert said in view.sentences(c)


def compute_bound(model="gpt-tiny", compile="off"):
    return {"run_id": "lm1", "status": "ok", "study": "transformer_training",
            "params": {"model": model, "dataset": "tokens", "batch_size": 8, "seq_len": 128,
                       "precision": "fp32", "compile": compile, "device": "cpu",
                       "num_workers": 0},
            "metrics": {"data_s": 0.001, "compute_s": 0.2, "device_type": "cpu"},
            "details": {"epochs": []}, "host_load": {"busy": False, "start": {}}}


def test_diagnose_gives_the_measured_break_even_of_the_same_work_else_the_command():
    rec = compute_bound()
    advice = rules.diagnose(rec).advice
    assert "; torch.compile: not measured here for this work (`python -m benchlib run " \
           "55_compile -p model gpt-tiny -p dataset tokens -p batch_size 8 -p precision fp32 " \
           "-p seq_len 128 -p device cpu` measures" in advice
    same = pd.DataFrame([{
        "study": "compile", "status": "ok", "run_id": "c1", "started_at": "2026-11-28T10:00",
        "model": "gpt-tiny", "dataset": "tokens", "batch_size": 8, "seq_len": 128,
        "precision": "fp32", "compile": "default", "compile_cache": "warm", "device": "cpu",
        "num_workers": 0,
        "break_even_steps": 120.0, "break_even_low": 80.0, "break_even_high": 160.0,
        "break_even_n": 5, "speedup_verdict": "faster"}])
    advice = rules.diagnose(rec, same).advice
    assert advice.endswith("; torch.compile on this testbed for the same work: default, warm: "
                           "pays off after 120 steps (95% CI 80 to 160, n=5 launches a side) "
                           "(run c1)")
    unsettled = same.assign(break_even_high=None, speedup_verdict="inconclusive")
    assert "default, warm: not settled: 80 steps to never (95% CI 80 to never" in \
        rules.diagnose(rec, unsettled).advice
    other = rules.diagnose(compute_bound(model="resnet18"), same).advice
    assert "not measured here for this work" in other  # another model's break-even is not this one's
    assert "torch.compile" not in rules.diagnose(compute_bound(compile="default"), same).advice


# ------------------------------------------------------------------ calibrate (the GPU check's
# part 4: tests/test_gpucheck.py)

def test_calibrate_lm_runs_the_same_arithmetic_in_both_loops():
    tiny = {"n_layer": 1, "n_head": 2, "n_embd": 32, "vocab_size": 64, "block_size": 16}
    check = calibrate_lm.same_work(2, torch.device("cpu"), tiny)
    assert check["same_work"] and check["max_weight_diff"] == 0.0
    assert check["benchlib_loss"] == check["bare_loss"]


# ------------------------------------------------------------------ the cache and the window

def test_a_warm_start_whose_cache_is_gone_compiles_cold_and_says_so(tmp_path):
    """Before: `compile_cache_from: ... is not a cache folder an earlier process filled;
    run one with --compile-cache-to`, a failed row naming a worker flag the notebook user
    never set. Now the launch compiles cold and its record says why."""
    folder, used = compiler.own_cache(str(tmp_path / "gone"))
    assert folder.is_dir() and used["compile_cache_used"] == "cold"
    assert used["compile_cache_note"].startswith("warm start missed: the cache the priming "
                                                 "launch filled") and "--" not in used["compile_cache_note"]
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "fxgraph").mkdir()
    _, warm = compiler.own_cache(str(tmp_path / "kept"))
    assert warm["compile_cache_used"] == "warm" and "compile_cache_note" not in warm
    # a warm start that found its folder but still missed: named, with the misses
    assert compiler.warm_missed({"cache_misses": 7}, "warm")["compile_cache_note"].startswith(
        "warm start missed: 7 cache misses")
    assert compiler.warm_missed({"cache_misses": 0}, "warm") == {}
    assert compiler.warm_missed({"cache_misses": 7}, "cold") == {}


def test_a_sites_remote_inductor_cache_is_turned_off_and_named(monkeypatch):
    """A cluster that turns on a remote FX-graph cache for everyone would make a cold row
    warm: the launch turns it off and its record names it."""
    from torch._inductor import config

    monkeypatch.setenv("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "1")
    monkeypatch.setenv("TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE", "0")
    for name in compiler.REMOTE_CACHE_CONFIG:
        monkeypatch.setattr(config, name, getattr(config, name))
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    _, used = compiler.own_cache()
    assert used["compile_remote_caches_off"] == "fx_graph_remote_cache"
    assert os.environ["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"] == "0"
    assert config.fx_graph_remote_cache is False and config.autotune_remote_cache is False
    assert compiler.own_cache()[1]["compile_remote_caches_off"] is None  # all off now


def test_a_recompile_inside_the_timed_window_is_counted_and_named():
    """A compile that finished in the warm-up leaves the window clean; a recompile after
    the window began (a new batch shape: a last, smaller batch) is named with its seconds:
    the steady figure includes it, which a median over launches would hide."""
    import time

    torch._dynamo.reset()
    f = torch.compile(torch.nn.Linear(4, 4), backend="eager")
    f(torch.ones(2, 4))
    start = time.time()
    clean, _ = compiler.recompiles(start)
    assert clean["compiled_in_warmup"] is True and clean["compiles_in_window"] == 0
    f(torch.ones(3, 4))  # a guard fails: the batch dimension changed
    late, where = compiler.recompiles(start)
    assert late["compiled_in_warmup"] is False and late["compiles_in_window"] == 1
    assert late["compile_in_window_s"] >= 0 and "size mismatch" in where["compiles_in_window"][0]
    torch._dynamo.reset()
