"""The scaling_projection study (notebook 45): inputs from numbers, records or seed 003's
tables, each with its source; a missing one named with how to measure it; its sentences."""

import math
import re

import pandas as pd
import pytest

from benchlib.analysis import scaling_projection as sp
from benchlib.config import ScalingProjectionConfig
from benchlib.core.stats import median_abs_error
from benchlib.errors import ConfigError, UsageError


def record(run_id, notebook, started, **fields):
    return {"run_id": run_id, "notebook": notebook, "status": "ok", "started_at": started,
            **fields}


RECORDS = pd.DataFrame([
    record("aaaaaaaaaaa1", "40_framework_comparison.ipynb", "2026-01-02", world_size=1,
           samples_per_s=8.0, batch_size=8, dataset="synthetic", precision="fp32",
           channels_last=False, compile=False, model_params=11_689_512, threads_per_rank=2,
           arch="resnet18", device_name="cpu"),
    record("aaaaaaaaaaa2", "40_framework_comparison.ipynb", "2026-01-03", world_size=1,
           samples_per_s=2.0, batch_size=8, dataset="synthetic", precision="amp_bf16",
           channels_last=False, compile=False, model_params=11_689_512, threads_per_rank=2),
    record("aaaaaaaaaaa3", "40_framework_comparison.ipynb", "2026-01-04", world_size=2,
           samples_per_s=30.0, batch_size=8, dataset="synthetic", precision="fp32"),
    record("bbbbbbbbbbb1", "20_dp_vs_ddp.ipynb", "2026-01-05", world_size=2, samples_per_s=100.0,
           batch_size=32, busbw_gbps=1.5, strategy="ddp", model="pyramidnet"),
    record("ccccccccccc1", "10_single_device_io.ipynb", "2026-01-06", samples_per_s=9000.0,
           mode="traverse", batch_size=64),
    record("ccccccccccc2", "10_single_device_io.ipynb", "2026-01-07", samples_per_s=900.0,
           mode="train", batch_size=64),
])


def test_defaults_project_seed_003_pytorch_without_any_record():
    cfg = ScalingProjectionConfig()
    inp = sp.build_inputs(cfg, pd.DataFrame())
    assert inp.compute_s == pytest.approx(128 / 347.12)  # seed 003's 1-GPU row, batch 128
    assert inp.input_ceiling == pytest.approx(1241.9, abs=0.1)  # docs/projection.md
    assert inp.inter_busbw_gbps == 10.0 and inp.sources["inter_busbw_gbps"] == "given"
    assert inp.sources["compute_s"] == ("1-GPU row of seed 003 PyTorch: ResNet-50 v1.5 on "
                                       "ImageNet, batch 128, on a V100 16G")
    df = sp.project(inp, sp.sizes(cfg))
    assert list(df["devices"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert sp.stops_sentence(df, "PyTorch") == (
        "PyTorch: compute sets the step up to 4 device(s); from 8, **input** does (45% "
        "efficiency there and at 1,024 devices).")


def test_newest_picks_the_best_record_of_each_input():
    cfg = ScalingProjectionConfig(compute="newest", intra_busbw="newest", inter_busbw="2",
                                  input_ceiling="newest", devices_per_node=2, host_cores=2,
                                  model="resnet18")
    inp = sp.build_inputs(cfg, RECORDS)
    # fp32 on one device, not the newer bf16 run nor the 2-rank one
    assert (inp.compute_s, inp.batch_size) == (pytest.approx(1.0), 8)
    assert inp.grad_bytes == 4 * 11_689_512 and inp.compute_threads == 2
    assert inp.sources["compute_s"] == \
        "run aaaaaaaaaaa1 (40_framework_comparison: resnet18 on synthetic, batch 8, on cpu)"
    assert inp.intra_busbw_gbps == 1.5 and inp.input_ceiling == 9000.0  # traverse, not train
    assert inp.sources["intra_busbw_gbps"].startswith("run bbbbbbbbbbb1 (20_dp_vs_ddp: pyramidnet, "
                                                      "batch 32)")


def test_newest_compute_is_the_newest_record_of_the_model_projected_and_says_when_none_is():
    """A newer one-device row of another model (a GPT-2 of one's own, as the smoke study has
    after its ResNet rows) is not what a ResNet projection is taken from; with no row of the
    model asked for, the newest of any is used, named as such."""
    gpt = record("ddddddddddd1", "40_framework_comparison.ipynb", "2026-01-08", world_size=1,
                 samples_per_s=50.0, batch_size=8, dataset="synthetic", precision="fp32",
                 channels_last=False, compile=False, model_params=200_000, threads_per_rank=2,
                 model="hf:gpt2", device_name="cpu")
    records = pd.concat([RECORDS, pd.DataFrame([gpt])], ignore_index=True)
    resnet = ScalingProjectionConfig(compute="newest", model="resnet18")
    assert sp.build_inputs(resnet, records).sources["compute_s"] == \
        "run aaaaaaaaaaa1 (40_framework_comparison: resnet18 on synthetic, batch 8, on cpu)"
    other = sp.build_inputs(ScalingProjectionConfig(compute="newest", model="resnet50"), records)
    assert other.sources["compute_s"] == (
        "run ddddddddddd1 (40_framework_comparison: hf:gpt2 on synthetic, batch 8, on cpu); no "
        "record of resnet50, so "
        "the projection is of this run's model")
    assert other.grad_bytes == 4 * 200_000


def test_a_run_id_names_one_record_and_a_wrong_one_says_how_to_measure():
    cfg = ScalingProjectionConfig(input_ceiling="ccccccccccc1")
    assert sp.build_inputs(cfg, RECORDS).input_ceiling == 9000.0
    with pytest.raises(UsageError) as e:
        sp.build_inputs(ScalingProjectionConfig(input_ceiling="ccccccccccc2"), RECORDS)
    assert str(e.value) == ("input_ceiling: no record ccccccccccc2 that measures it under the "
                            "results folder; run notebook 10 in traverse mode with the training's "
                            "num_workers, give samples/s, or none for synthetic data")


@pytest.mark.parametrize("changes, message", [
    ({"compute": "newest"}, "compute: no record that measures it under the results folder; "
                            "run notebook 40 (or 20, strategy single) on one device"),
    ({"inter_busbw": "newest"}, "inter_busbw: no record that measures it under the results "
                                "folder; run the all-reduce study across two nodes"),
    ({"compute": "100", "model": "toynet"}, "grad_bytes: unknown model 'toynet' (known: "),
    ({"compute": "100", "host_cores": 4}, "compute_threads: missing; CPU ranks sharing "
                                          "--host-cores need --compute-threads"),
    ({"framework": "OneFlow", "batch_size": 32}, "compute: seed 003 has no four 1-node rows of "
                                                 "OneFlow at batch 32"),
])
def test_an_input_the_records_cannot_give_is_named_with_how_to_measure_it(changes, message):
    with pytest.raises(UsageError) as e:
        sp.build_inputs(ScalingProjectionConfig(**changes), pd.DataFrame())
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize("changes, message", [
    ({"compute": "fast"}, "compute: 'fast' is not a positive number or one of: run id, newest, dlperf"),
    ({"inter_busbw": "dlperf"}, "inter_busbw: 'dlperf' is not a positive number or one of: run id, newest"),
    ({"input_ceiling": "-3"}, "input_ceiling: '-3' is not a positive number"),
    ({"framework": "MxNet"}, "framework: 'MxNet' is not one of OneFlow"),
    ({"batch_size": 100}, "batch_size: seed 003 has batch 32, 64, 128, 160, not 100"),
    ({"nodes": "1,two"}, "nodes: '1,two' is not comma-separated node counts"),
    ({"nodes": "1,2048"}, "nodes: must be between 1 and 1024, got 2048"),
    ({"devices_per_node": 10_000_000}, "devices_per_node: must be between 1 and 1024, got 10000000"),
    ({"what_ifs": "speed:2x"}, "what_ifs: 'speed:2x' is not NAME:VALUE or NAME:Nx"),
])
def test_config_takes_validated_values_only(changes, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        ScalingProjectionConfig(**changes)


def test_curves_hold_each_what_if_and_doubling_the_input_ceiling_lifts_the_node_cap():
    cfg = ScalingProjectionConfig(nodes="2,4")
    inp = sp.build_inputs(cfg, pd.DataFrame())
    df = sp.curves(inp, sp.sizes(cfg), cfg.what_if_specs())
    assert list(df["case"].unique()) == ["as given", "what if inter_bw=2x",
                                         "what if input_ceiling=2x", "what if batch_size=256"]
    at32 = df[df["devices"] == 32].set_index("case")["samples_per_s"]
    assert at32["as given"] == pytest.approx(4 * 1241.9, abs=1)  # input-bound: 4 nodes' cap
    assert at32["what if inter_bw=2x"] == pytest.approx(at32["as given"])  # not the network
    assert at32["what if input_ceiling=2x"] > 1.3 * at32["as given"]


def test_conclusions_compute_the_check_and_each_runs_headline():
    runs = pd.DataFrame([{"run_id": "r1", "compute_source": "run x (40, resnet18, cpu)",
                          "stops_at_devices": math.nan, "stops_by": None,
                          "efficiency_largest": 0.471, "largest_devices": 1024}])
    text = sp.conclusions(runs).split("\n\n")
    found = re.fullmatch(r"Fitted on seed 003's 1-node rows only, the model predicts its 25 "
                         r"published 16- and 32-GPU cells \(repeated cells dropped\) with a median "
                         r"absolute error of \*\*(\d+\.\d)%\*\* against (\d+\.\d)% for nodes x the "
                         r"8-GPU row \(worst: Paddle batch 128 on 16 GPUs, -52\.0%\); on 22 cells of "
                         r"DLPerf's per-framework pages, never used in its design, \*\*(\d+\.\d)%\*\* "
                         r"against (\d+\.\d)%\.", text[0])
    check, outside = sp.check_seed003.check_dlperf(), sp.check_seed003.out_of_sample()
    assert found and [float(x) for x in found.groups()] == pytest.approx(
        [median_abs_error(t[c]) for t in (check, outside) for c in ("error_%", "naive_error_%")],
        abs=0.051)
    assert text[1].startswith("Seed 003's PyTorch node (batch 128, 10 GB/s between nodes): "
                              "compute sets the step up to 4 device(s); from 8, **input** does")
    assert text[2] == ("Run r1 (compute: run x (40, resnet18, cpu)): compute sets the step at "
                       "every size; 47% efficiency at 1,024 devices.")


def test_figures_have_titles_and_axis_units():
    cfg = ScalingProjectionConfig()
    inp = sp.build_inputs(cfg, pd.DataFrame())
    df = sp.curves(inp, sp.sizes(cfg), cfg.what_if_specs())
    scaling = sp.scaling_figure(df, "PyTorch")
    assert [a.get_ylabel() for a in scaling.axes] == ["samples/s (log)", "efficiency (% of linear)"]
    terms = sp.terms_figure(df[df["case"] == "as given"], "terms")
    assert terms.axes[0].get_ylabel() == "ms per step (log)"
    assert [t.get_text() for t in terms.axes[0].texts] == ["compute from here", "input from here"]
    check = sp.check_figure(sp.check_seed003.check_dlperf())
    assert check.axes[0].get_title().startswith("Seed 003: predicted from 1 node vs published")
