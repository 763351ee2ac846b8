"""Notebook 40's pieces: seed 003's data, the DLPerf method's settings, MFU, variants."""

import math

import pytest
import torch

from benchlib import reference
from benchlib.config import FrameworkComparisonConfig
from benchlib.core import loops, metrics
from benchlib.core.models import build_model
from benchlib.errors import ConfigError, UsageError
from benchlib.studies import framework_comparison
from benchlib.trainers import ddp_flags
from benchlib.trainers.job import build_job

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


def test_seed_003_tables_are_there_cell_for_cell():
    df = reference.dlperf().set_index(["framework", "batch_size", "nodes", "devices"]).sort_index()
    assert df.loc[("PyTorch", 128, 1, 1), "samples_per_s"] == 347.12
    assert df.loc[("PyTorch", 160, 4, 32), "samples_per_s"] == 5594.45
    assert df.loc[("Paddle", 32, 1, 8), "samples_per_s"] == 1089.29
    assert df.loc[("TensorFlow", 160, 2, 16), "status"] == "oom"
    assert math.isnan(df.loc[("OneFlow", 64, 1, 1), "samples_per_s"])
    assert df.loc[("MxNet", 128, 1, 1), "status"] == "todo"
    # the seed's own speedup column for PyTorch at batch 128: 1.74 2.59 4.05 6.87 16.0
    speedups = df.loc[("PyTorch", 128)]["speedup"].round(2).tolist()
    assert speedups == [1.0, 1.74, 2.59, 4.05, 6.87, 16.0]
    assert len(df) == 5 * 4 * 6 and (df["source"].str.contains("seed 003")).all()


def test_published_figures_and_peaks_carry_their_sources():
    pub = reference.published()
    assert len(pub) == 19 and pub["source"].str.len().min() > 10
    assert pub[pub["system"] == "1 x H100 SXM5 80GB"]["samples_per_s"].item() == 2616
    flops, source = reference.peak_flops("NVIDIA H100 80GB HBM3", "amp_bf16")
    assert flops == 989.4e12 and "data sheet" in source
    assert reference.peak_flops("NVIDIA A100-SXM4-80GB", "tf32")[0] == 156e12
    assert reference.peak_flops("cpu", "fp32") is None


@pytest.mark.parametrize("name, precision, peak", [
    ("NVIDIA H100 80GB HBM3", "amp_bf16", 989.4e12),   # SXM, as torch names it
    ("NVIDIA H100 PCIe", "amp_bf16", 756e12),
    ("NVIDIA H100 NVL", "amp_bf16", 835.5e12),
    ("NVIDIA H200", "amp_bf16", 989.4e12),
    ("Tesla V100-SXM2-16GB", "fp32", 15.7e12),
    ("Tesla V100-PCIE-32GB", "fp32", 14e12),
    ("Tesla V100S-PCIE-32GB", "fp32", 16.4e12),
    ("NVIDIA H200 NVL", "amp_bf16", None),               # not in the table: unknown
    ("NVIDIA H100", "amp_bf16", None),                   # which H100? unknown, not SXM's
    ("NVIDIA H100 PCIe H100 NVL", "amp_bf16", None),     # two models with different peaks
])
def test_mfu_peak_is_looked_up_by_exact_model_and_ambiguity_gives_unknown(name, precision, peak):
    found = reference.peak_flops(name, precision)
    assert (found[0] if found else None) == peak


def test_mfu_is_unknown_without_a_published_peak_never_invented():
    value, why = metrics.mfu(1000.0, 1, 12.3e9, "cpu", "fp32")
    assert value is None and why == "no published peak for cpu at fp32"
    value, source = metrics.mfu(2600.0, 1, 3 * 4.1e9, "NVIDIA H100 80GB HBM3", "amp_bf16")
    assert value == pytest.approx(2600 * 3 * 4.1e9 / 989.4e12) and "H100" in source
    value, why = metrics.mfu(2600.0, 1, None, "NVIDIA H100 80GB HBM3", "amp_bf16")
    assert value is None and why.startswith("no FLOP count for this model (peak: NVIDIA H100")
    assert framework_comparison.mfu is metrics.mfu  # the study's MFU is the one function


def test_training_flops_of_resnet50_are_three_forward_passes():
    args = ddp_flags.parser("single").parse_args(["--model", "resnet50", "--dataset", "synthetic"])
    flops = build_job(args).flops_per_sample()
    forward = 2 * 4.09e9  # torchvision's ResNet-50: 4.09 GMACs per 224px image
    assert flops == pytest.approx(3 * forward, rel=0.03)


def test_dlperf_settings_lr_is_global_batch_over_1000_and_steps_add_up():
    cfg = FrameworkComparisonConfig(batch_size=128, nproc_per_node=2)
    assert framework_comparison.learning_rate(cfg) == 0.256 and cfg.steps == 125
    [launch] = framework_comparison.launches(cfg)
    params = launch.params
    assert (params["max_steps"], params["warmup_steps"], params["lr"]) == (125, 25, 0.256)
    # DLPerf's momentum is the trainer's own default: the worker trains with 0.9
    args = ddp_flags.parser("ddp").parse_args([])
    assert "momentum" not in params and args.momentum == 0.9


@pytest.mark.parametrize("kw, message", [
    ({"batch_size": 0}, "batch_size: must be >= 1, got 0"),
    ({"precision": "fp8"}, "precision: 'fp8' is not one of fp32, tf32, amp_bf16, amp_fp16"),
    ({"model": "vit"}, "model: 'vit' is not one of toynet, simplecnn, pyramidnet, resnet18"),
    ({"model": "toynet"}, "model: toynet takes 1x28x28 inputs"),
    ({"dataset": "cifar10"}, "dataset: 'cifar10' is not one of synthetic, imagefolder"),
])
def test_framework_config_refuses_bad_values(kw, message):
    with pytest.raises(ConfigError, match=message):
        FrameworkComparisonConfig(**kw)


@pytest.mark.parametrize("kw, message", [
    ({"precision": "amp_fp16"}, "precision: amp_fp16 needs a CUDA GPU; on CPU use fp32 or amp_bf16"),
    ({"precision": "tf32"}, "precision: tf32 needs a CUDA GPU"),
    ({"nproc_per_node": 64}, "nproc_per_node: 64 asked for, but only"),
    ({"device": "gpu"}, "device: gpu asked for"),
])
@NO_CUDA
def test_what_this_machine_cannot_run_is_refused_before_launch(kw, message):
    with pytest.raises(UsageError, match=message):
        framework_comparison.preflight(FrameworkComparisonConfig(**{"device": "cpu", **kw}))


def test_an_image_folder_too_small_for_the_window_is_refused(small_data):
    cfg = FrameworkComparisonConfig(path=str(small_data), dataset="imagefolder", device="cpu", batch_size=8)
    with pytest.raises(ConfigError, match="the data set has 40 training samples: 5 steps of "
                                          "batch 8 x 1, fewer than the 125"):
        framework_comparison.preflight(cfg)


def test_amp_bf16_and_channels_last_train_on_cpu():
    torch.manual_seed(0)
    model = build_model("resnet18", (3, 32, 32))
    step = loops.Stepper("train", torch.device("cpu"), model, lr=0.01, precision="amp_bf16",
                         channels_last=True)
    assert model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    loss = step(torch.rand(4, 3, 32, 32), torch.randint(0, 10, (4,)))
    assert loss.dtype == torch.float32 and math.isfinite(loss.item())
    loops.Stepper("train", torch.device("cpu"), build_model("toynet"), precision="fp32")
    assert torch.backends.cudnn.allow_tf32 is False  # fp32 means fp32
