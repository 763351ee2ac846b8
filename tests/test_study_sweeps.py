"""The study notebooks swept together, as `make run` sweeps them, and the analysis over all
of their records: one sweep of every table below and one report (notebook 90 run once),
of which each test reads its study's part. One sweep instead of one per study saves the
suite three analysis runs and report builds; the parts still fail one by one."""

import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from benchlib.cli import main
from benchlib.core import envinfo
from benchlib.launch.protocol import JOINED
from benchlib.records import results
from benchlib.report import publish

# the module's one sweep (19 rows of real launches and a report) runs inside its first
# test's time box: 4-5 minutes on a quiet 2-core host, 10 beside a busy suite; the box is
# there to catch a hang, not to time the sweep
pytestmark = [pytest.mark.notebook, pytest.mark.timeout(1500)]

PLAN = """
studies:
  - name: io_workers
    notebook: 10_single_device_io
    defaults: {{path: {data}, device: cpu, dataset: mydataset, repeats: 2, warmup_steps: 1}}
    grid: {{num_workers: [0, 1]}}
  - name: io_variants
    notebook: 10_single_device_io
    defaults: {{path: {data}, device: cpu, mode: traverse, repeats: 2, warmup_steps: 1,
               profile: true}}
    grid: {{variant: [raw, preload]}}
  - name: dp_ddp
    notebook: 20_dp_vs_ddp
    defaults: {{path: {data}, device: cpu, dataset: cifar10, model: pyramidnet, depth: 8,
               alpha: 12, batch_size: 8, max_steps: 4, warmup_steps: 1, epochs: 2}}
    table:
      - {{strategy: single, nproc_per_node: 1}}
      - {{strategy: ddp, launcher: torchrun, nproc_per_node: 2, allreduce: true,
         allreduce_max_bytes: 65536}}
      - {{strategy: ddp, launcher: torchrun, nproc_per_node: 2, epochs: 1, repeats: 2,
         repeat_mode: process}}
  - name: multinode
    notebook: 30_multinode_lightning
    defaults: {{path: {data}, device: cpu, dataset: mydataset, model: toynet,
               batch_size: 16, epochs: 2, max_steps: 6, warmup_steps: 2}}
    table:
      - {{trainer: ddp, launcher: torchrun, nnodes: 1}}
      - {{trainer: ddp, launcher: torchrun, nnodes: 2}}
      - {{trainer: lightning, launcher: lightning, nnodes: 2}}
  - name: fault
    notebook: 35_fault_tolerance
    defaults: {{path: {data}, device: cpu, dataset: mydataset, model: toynet,
               max_steps: 8, epochs: 1, fail_at_step: 6, checkpoint_every: 4}}
    table: [{{nproc_per_node: 2}}]
  - name: framework
    notebook: 40_framework_comparison
    defaults: {{device: cpu, model: resnet18, dataset: synthetic, image_size: 32, batch_size: 4,
               skip_steps: 1, warmup_steps: 1, timed_steps: 3, repeats: 2}}
    grid: {{nproc_per_node: [1, 2]}}
  - name: own_model
    notebook: 20_dp_vs_ddp
    defaults: {{device: cpu, strategy: ddp, launcher: torchrun, nproc_per_node: 2,
               model: "examples.custom_model:build", model_args: {{width: 8}},
               dataset: "examples.custom_data:shapes", batch_size: 8, max_steps: 4,
               warmup_steps: 1, loss: "examples.custom_model:smoothed_cross_entropy"}}
    table: [{{epochs: 1}}]
  - name: own_model_framework
    notebook: 40_framework_comparison
    defaults: {{device: cpu, batch_size: 4, image_size: 32, skip_steps: 1, warmup_steps: 1,
               timed_steps: 3, repeats: 2, compare_jax: false}}
    table:
      - {{model: "examples.custom_model:build", dataset: "examples.custom_data:shapes",
         nproc_per_node: 2, compare_jax: true}}
      - {{model: "timm:resnet10t", dataset: synthetic}}
      - {{model: "hf:gpt2", dataset: synthetic, seq_len: 32, vocab_size: 256,
         model_args: {{n_layer: 2, n_head: 2, n_embd: 64, n_positions: 64}}}}
  - name: transformer
    notebook: 50_transformer_training
    defaults: {{path: {data}, device: cpu, model: gpt-tiny, dataset: tokenfile, seq_len: 32,
               batch_size: 4, max_steps: 6, warmup_steps: 2, epochs: 2, nproc_per_node: 2}}
    table: [{{strategy: ddp}}, {{strategy: fsdp2}}]
"""


@dataclass
class Swept:
    code: int  # the sweep's exit status
    outputs: Path
    df: pd.DataFrame  # every record
    analysis: str  # the report's analysis page

    def table(self, name: str) -> pd.DataFrame:
        rows = self.df[self.df["table"] == name]
        assert len(rows) and set(rows["status"]) == {"ok"}, rows[["run_id", "status", "error"]]
        return rows


@pytest.fixture(scope="module")
def swept(tmp_path_factory, small_data) -> Swept:
    root = tmp_path_factory.mktemp("swept")
    outputs = root / "outputs"
    plan = root / "plan.yaml"
    plan.write_text(PLAN.format(data=small_data))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLIB_OUTPUTS", str(outputs))
        code = main(["sweep", str(plan), "--no-progress"])
        df = results.load_results(outputs / "results")
        publish.build(outputs)
        yield Swept(code, outputs, df, (outputs / "report" / "analysis.html").read_text())


def test_every_row_of_every_study_ran_ok(swept):
    assert swept.code == 0 and len(swept.df) == 19 and set(swept.df["status"]) == {"ok"}
    # each record names its study (the notebook's) apart from its table
    assert dict(zip(swept.df["table"], swept.df["study"])) == {
        "io_workers": "single_device_io", "io_variants": "single_device_io",
        "dp_ddp": "dp_vs_ddp", "multinode": "multinode_lightning",
        "fault": "fault_tolerance", "framework": "framework_comparison",
        "own_model": "dp_vs_ddp", "own_model_framework": "framework_comparison",
        "transformer": "transformer_training"}


def test_io_rows_feed_the_analysis_conclusions(swept):
    io = swept.df[swept.df["study"] == "single_device_io"]
    assert len(io) == 4 and set(io["status"]) == {"ok"} and (io["samples_per_s"] > 0).all()
    executed = nbformat.read(swept.outputs / io.iloc[0]["executed_notebook"], 4)
    assert not [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    analysis = swept.analysis
    assert "fastest with <strong>num_workers=" in analysis
    cpu = envinfo.cpu_model()  # a record names the CPU's model, never just "cpu"
    assert re.search(rf"FashionMNIST traverse on {re.escape(cpu)} \(1 ep\): (no clear difference "
                     r"between|<strong>(preload|raw) x[\d.]+ over)", analysis)
    assert "raw takes <strong>" in analysis and "seed 000 measured 15.9x" in analysis
    assert f"fashion-mnist, traverse (1 ep, s, {cpu})" in analysis  # the seed-shaped table


def test_dp_ddp_rows_give_speedup_and_busbw_in_the_analysis(swept):
    df = swept.table("dp_ddp")
    process = df[df["repeat_mode"] == "process"].iloc[0]
    assert process["samples_per_s_n"] == 2 and process["launches"] == 2  # one value a launch
    ddp = df[(df["strategy"] == "ddp") & (df["repeat_mode"] == "epoch")].iloc[0]
    assert ddp["world_size"] == 2 and ddp["global_batch"] == 16 and ddp["busbw_gbps"] > 0
    assert (swept.outputs / "logs" / ddp["run_id"] / "train" / "rank1.log").exists()
    analysis = swept.analysis
    assert "<strong>DDP via torchrun</strong> on 2 device(s)" in analysis
    assert "<strong>speedup " in analysis and "Seed 002 on two P100s" in analysis
    assert "over 2 epochs of one launch" in analysis and "over 2 launches" in analysis


def test_framework_rows_scale_and_sit_beside_seed_003(swept):
    df = swept.table("framework")
    assert set(df["world_size"]) == {1, 2} and df["mfu"].isna().all()
    assert (df["flops_per_sample"] > 0).all() and (df["lr"] == df["nproc_per_node"] * 4 / 1000).all()
    one, two = df[df["nproc_per_node"] == 1].iloc[0], df[df["nproc_per_node"] == 2].iloc[0]
    # the one-device row's notebook, the one with JAX beside it
    executed = nbformat.read(swept.outputs / one["executed_notebook"], 4)
    text = "".join(str(o) for c in executed.cells for o in c.get("outputs", []))
    assert f"PyTorch here ({envinfo.cpu_model()}, fp32)" in text and "OneFlow" in text
    assert one["jax_backend"] == "cpu" and one["jax_samples_per_s"] > 0  # measured live
    # the JAX worker's own figures, timed as PyTorch's are (one wait at the end of the window),
    # one per repeat, its compile apart from its steps
    assert one["jax_samples_per_s_n"] == 2 and one["jax_timing"] == "window"
    assert one["jax_compile_s"] > one["jax_step_s"] > 0
    assert one["jax_version"] == importlib.metadata.version("jax")
    assert "JAX " in text and "here (cpu, fp32)" in text
    assert two["jax_skipped"] == "JAX is measured on one device with synthetic data only"
    analysis = swept.analysis
    assert "fp32 on 2 devices: speedup" in analysis and "Seed 003 (PyTorch 1.6, V100" in analysis
    assert "MFU is unknown here" in analysis
    assert "on the same machine, same ResNet and timing (1 row(s)): <strong>" in analysis


def test_multinode_and_fault_tolerance_rows_feed_the_analysis(swept):
    mn = swept.table("multinode").set_index(["trainer", "nnodes"])
    assert mn.loc[("ddp", 2), "world_size"] == 2 and mn.loc[("lightning", 2), "world_size"] == 2
    assert mn.loc[("lightning", 2), "cluster_environment"] == "LightningEnvironment"
    # two "nodes" each way a user starts them: two torchrun agents (a launcher log each) and
    # Lightning's own launcher (MASTER_ADDR, NODE_RANK); one gloo rank a node, both joined
    for trainer in ("ddp", "lightning"):
        row = mn.loc[(trainer, 2)]
        assert row["global_batch"] == 2 * 16 and row["backend_used"] == "gloo"
        train = swept.outputs / "logs" / row["run_id"] / "train"
        for rank in (0, 1):
            text = (train / f"rank{rank}.log").read_text()
            assert text.startswith(f"rank {rank}/2 (local 0) on ") and JOINED in text, text
    assert mn.loc[("lightning", 2), "strategy"] == "ddp"
    assert mn.loc[("lightning", 2), "devices_per_node"] == 1
    ddp_logs = swept.outputs / "logs" / mn.loc[("ddp", 2), "run_id"] / "train"
    assert sorted(p.name for p in ddp_logs.glob("launcher-node*.log")) == [
        "launcher-node0.log", "launcher-node1.log"]
    fault = swept.table("fault").iloc[0]
    assert fault["restarts"] == 1 and fault["steps_redone"] == 2  # killed after 6, resumed at 4
    assert fault["loss_diff"] <= 1e-6 * max(abs(fault["loss_last"]), 1)
    analysis = swept.analysis
    assert "<strong>ddp</strong> via torchrun on 2 node(s) x 1" in analysis
    assert mn.loc[("lightning", 2), "topology"] == "one host"  # both "nodes" ran here
    assert re.search(r"2 x 1: (no clear difference between|<strong>(Lightning|raw DDP) x[\d.]+ "
                     r"over)", analysis)  # Lightning against raw DDP, same layout
    assert "(2 x 1) put every node on one host" in analysis  # the loopback caveat
    assert "Steps redone stayed within restarts x (checkpoint_every - 1)" in analysis
    assert "passed before the restarted ranks were ready" in analysis
    assert "1 restart(s), 2 step(s) redone" in analysis
    assert "it ended at the same loss as the uninterrupted run" in analysis


def test_a_model_and_data_set_of_ones_own_train_on_two_ranks_and_say_what_ran(swept):
    """examples/: a model function with model_args, a data set function and a loss of the
    user's, through notebook 20 on 2 gloo ranks and notebook 40; a timm and a transformers
    model built from their configs (no download) through notebook 40."""
    own = swept.table("own_model").iloc[0]
    assert own["world_size"] == 2 and own["backend_used"] == "gloo" and own["samples_per_s"] > 0
    assert own["model_class"] == "examples.custom_model.WideCNN"
    assert own["model_args"] == '{"width": 8}' and own["model_params"] == 3 * 8 * 9 + 8 * 8 * 9 * 2 \
        + 3 * 2 * 8 + 8 * 4 + 4  # three convs without bias, three batch norms, the head
    # its identity: the builder's and its class's file (one here), and its model_args
    assert own["model_source"] == "examples/custom_model.py; model_args"
    assert len(own["model_source_sha"]) == 16
    assert own["flops_per_sample"] > 0
    # memory: fp32 parameters, a gradient each, SGD's momentum buffer each; the window's
    # peak RSS (this is a CPU) holds the interpreter as well
    assert own["param_bytes"] == own["grad_bytes"] == own["optimizer_state_bytes"] \
        == 4 * own["model_params"]
    assert own["peak_kind"] == "rss, this window" and own["peak_rss_bytes"] == own["peak_bytes"]
    # the breakdown is of the model's own bytes (the RSS above what the process held before
    # the model was built), gradients left in: they do not all exist at the peak
    assert own["model_peak_kind"] == "rss above the baseline before the model was built"
    assert 0 < own["model_peak_bytes"] < own["peak_bytes"]
    assert own["other_bytes"] == own["model_peak_bytes"] - 2 * own["param_bytes"]
    assert own["breakdown_kind"].startswith("other holds activations and the gradients")
    assert pd.isna(own["peak_reserved_bytes"]) and pd.isna(own["alloc_retries"])  # CUDA's only
    assert pd.isna(own["energy_j"]) and pd.isna(own["cost_per_million_samples"])  # no counter
    fw = swept.table("own_model_framework").set_index("model")
    mine = fw.loc["examples.custom_model:build"]
    assert mine["world_size"] == 2 and mine["jax_skipped"].startswith("JAX trains the built-in")
    timm_row = fw.loc["timm:resnet10t"]
    assert timm_row["model_class"] == "timm.models.resnet.ResNet" and timm_row["samples_per_s"] > 0
    lm = fw.loc["hf:gpt2"]
    assert lm["model_class"].endswith("GPT2LMHeadModel") and lm["tokens_per_sample"] == 32
    assert lm["tokens_per_s"] == pytest.approx(lm["samples_per_s"] * 32)
    assert lm["tokens_per_s_p10"] <= lm["tokens_per_s"] <= lm["tokens_per_s_p90"]
    # 2 layers of n_embd 64 with a vocabulary of 256 (the data's ids) and 64 positions
    assert lm["model_params"] == 256 * 64 + 64 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64


def test_notebook_50_sets_fsdp2_beside_ddp_with_tokens_per_s_and_both_flop_counts(swept):
    """gpt-tiny on nanoGPT's train.bin (the tokenfile `benchlib data` wrote: windows of the
    memmap, each rank its own through DistributedSampler)."""
    lm = swept.table("transformer").set_index("strategy")
    for strategy in ("ddp", "fsdp2"):
        run = lm.loc[strategy]
        assert run["dataset"] == "tokenfile" and run["tokens_per_sample"] == 32
        assert run["world_size"] == 2 and run["tokens_per_s"] == pytest.approx(
            run["samples_per_s"] * 32) and run["tokens_per_s_per_device"] == run["tokens_per_s"] / 2
        assert abs(run["flop_count_ratio"] - 1) <= 0.05 and pd.isna(run["mfu"])  # no CPU peak
        assert run["mfu_peak_source"].startswith("no published peak for")
    assert lm.loc["fsdp2", "param_bytes"] == lm.loc["ddp", "param_bytes"] / 2  # its shard
    # FSDP2's collectives are not timed, and the record says so; DDP's all-reduce is
    assert lm.loc["fsdp2", "comm_unknown"] == ("FSDP2's all-gathers and reduce-scatters are "
                                               "not timed")
    assert pd.isna(lm.loc["ddp", "comm_unknown"]) and lm.loc["ddp", "comm_s"] > 0
    analysis = swept.analysis
    assert re.search(r"gpt-tiny, seq 32, batch 4, fp32: tokens/s (no clear difference between "
                     r"FSDP2 on 2 ranks and DDP on 2 ranks|<strong>(FSDP2|DDP) on 2 ranks x)",
                     analysis)
    assert "FSDP2&#x27;s peak memory is" in analysis or "FSDP2's peak memory is" in analysis
    assert "counter agree within" in analysis and "MFU is unknown here" in analysis
    landing = (swept.outputs / "report" / "index.html").read_text()
    assert re.search(r"fsdp2 on 2 ranks, gpt-tiny on tokenfile, seq 32, batch 4, fp32, on [^:<]+: "
                     r"<strong><a [^>]+>[\d,]+</a></strong> tokens/s", landing)
