"""The transformer study's parts (notebook 50): benchlib's GPT, its FLOPs counted two ways,
FSDP2 and activation checkpointing, and what is refused before any rank starts. The
notebook itself runs in test_study_sweeps.py."""

import json

import pytest
import torch

from benchlib.cli import main
from benchlib.config import TransformerTrainingConfig
from benchlib.core import gpt
from benchlib.distributed import fsdp
from benchlib.errors import ConfigError, UsageError
from benchlib.launch.launcher import launch
from benchlib.studies import transformer_training
from benchlib.trainers import ddp_flags
from benchlib.trainers.job import build_job


@pytest.mark.parametrize("name, params", [("gpt2-124m", 124_439_808), ("gpt2-350m", 354_823_168)])
def test_the_named_sizes_have_gpt2s_parameter_counts(name, params):
    """GPT-2 small and medium as OpenAI released them (transformers' GPT2LMHeadModel counts
    the same: the head is tied to the token embedding)."""
    with torch.device("meta"):
        model = gpt.build(name)
    assert sum(p.numel() for p in model.parameters()) == params
    assert model.head.weight is model.wte.weight


@pytest.mark.parametrize("name, seq_len", [("gpt-tiny", 256), ("gpt2-124m", 1024)])
def test_the_analytic_flops_per_token_agree_with_pytorchs_counter_within_5_percent(name, seq_len):
    args = ddp_flags.parser("single").parse_args(["--model", name, "--dataset", "tokens", "--seq-len",
                                            str(seq_len)])
    job = build_job(args)
    figures = job.flop_figures()
    analytic = job.described["flops_per_token_analytic"]
    cfg = job.model.cfg  # 6N + 12 L d T, N without the position table
    n = sum(p.numel() for p in job.model.parameters()) - cfg.block_size * cfg.n_embd
    assert analytic == 6 * n + 12 * cfg.n_layer * cfg.n_embd * seq_len
    assert figures["flops_per_token"] == figures["flops_per_sample"] / seq_len
    assert figures["flop_count_ratio"] == pytest.approx(1.0, abs=0.05)


def test_checkpointing_recomputes_the_same_gradients():
    torch.manual_seed(0)
    reference = gpt.build("gpt-tiny", seq_len=32)
    x = torch.randint(0, reference.cfg.vocab_size, (2, 32))

    def grads(model):
        torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
        return [p.grad.clone() for p in model.parameters()]

    expected = grads(reference)
    for mode in ("selective", "full"):
        model = gpt.build("gpt-tiny", seq_len=32)
        model.load_state_dict(reference.state_dict())
        fsdp.checkpoint_blocks(model, mode)
        assert all(isinstance(b, fsdp.Checkpointed) for b in model.blocks)
        for got, want in zip(grads(model), expected):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_selective_checkpointing_keeps_attention_and_every_other_matmul(monkeypatch):
    """`ac: selective` is torchtitan's op-level policy, as its docs say: in each block's
    forward, attention's output and the 1st and 3rd matmuls are saved, the 2nd and 4th
    recomputed with the norms, activations and adds."""
    decided = []
    real = fsdp.selective_policy

    def recording(meta):
        policy = real(meta)

        def decide(ctx, op, *args, **kwargs):
            decision = policy(ctx, op, *args, **kwargs)
            decided.append((op.__name__, decision.name))
            return decision
        return decide

    monkeypatch.setattr(fsdp, "selective_policy", recording)
    model = fsdp.checkpoint_blocks(gpt.build("gpt-tiny", seq_len=32), "selective")
    x = torch.randint(0, model.cfg.vocab_size, (2, 32))
    torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
    block = decided[:len(decided) // len(model.blocks)]  # each block decides the same
    matmuls = [d for op, d in block if op.startswith(("mm", "addmm"))]
    assert matmuls == ["MUST_SAVE", "PREFER_RECOMPUTE", "MUST_SAVE", "PREFER_RECOMPUTE"]
    assert [d for op, d in block if "scaled_dot_product" in op] == ["MUST_SAVE"]
    saved = {op for op, d in block if d == "MUST_SAVE"}
    assert saved <= {"addmm.default", "mm.default",
                     "_scaled_dot_product_flash_attention_for_cpu.default"}


@pytest.mark.distributed
def test_fsdp2_on_two_gloo_ranks_learns_what_ddp_learns(tmp_path):
    """The same model, seed and batches: FSDP2's sharded step and DDP's all-reduced one give
    the same losses, step by step (fp32); FSDP2's rank holds half the parameter bytes. The
    ranks start over tcp:// (the launcher is not the subject; no torchrun agent to import)."""
    common = {"model": "gpt-tiny", "dataset": "tokens", "seq_len": 32, "batch_size": 4,
              "epochs": 1, "max_steps": 5, "warmup_steps": 1, "device": "cpu", "lr": 0.05,
              "record_losses": 5, "log_interval": 0}
    got = {s: launch(s, {**common, "ac": "selective" if s == "fsdp2" else "none"},
                     tmp_path / s, "tcp", 2, timeout_s=300).result for s in ("ddp", "fsdp2")}
    ddp_losses, fsdp_losses = (got[s]["details"]["losses"] for s in ("ddp", "fsdp2"))
    assert len(ddp_losses) == 5 and ddp_losses[-1] < ddp_losses[0]  # it learns
    assert fsdp_losses == pytest.approx(ddp_losses, rel=1e-4)
    d, f = got["ddp"]["metrics"], got["fsdp2"]["metrics"]
    assert f["world_size"] == 2 and f["param_bytes"] == d["param_bytes"] / 2 \
        == 4 * d["model_params"] / 2
    assert f["tokens_per_sample"] == 32 and f["flop_count_ratio"] == pytest.approx(1, abs=0.05)


@pytest.mark.parametrize("fields, line", [
    (dict(model="gpt2-124m", seq_len=2048), "seq_len: 2048 is above gpt2-124m's 1024 positions"),
    (dict(vocab_size=4096), "vocab_size: the data's ids go up to 4095, beyond gpt-tiny's "
     "vocabulary of 2048"),
    (dict(model_args={"n_head": 3}), "model_args: n_embd 128 is not a multiple of n_head 3"),
    (dict(model_args={"width": 3}), "model_args: gpt-tiny takes n_layer, n_head"),
    (dict(model="resnet18", dataset="synthetic", seq_len=0, ac="selective", strategy="single",
          nproc_per_node=1), "ac: selective works block by block, and ResNet has no blocks"),
    (dict(model="resnet18", dataset="synthetic", seq_len=0), "strategy: fsdp2 works block by "
     "block, and ResNet has no blocks"),
])
def test_what_cannot_train_is_one_line_from_the_preflight(fields, line):
    cfg = TransformerTrainingConfig(device="cpu", **fields)
    with pytest.raises(ConfigError) as caught:
        transformer_training.preflight(cfg)
    assert str(caught.value).startswith(line) and "\n" not in str(caught.value)


def test_tokenfile_data_that_does_not_fit_the_model_is_one_line_from_the_preflight(tmp_path,
                                                                                  capsys):
    """nanoGPT's train.bin against the model: ids beyond its vocabulary, a window longer
    than the file, no file at all; each one line naming the field, before any rank."""
    from benchlib.config import DataPrepConfig
    from benchlib.data import prepare

    prepare.prepare(DataPrepConfig(path=str(tmp_path / "gpt2"), dataset="tokenfile",
                                   tokenfile_size=2000))  # GPT-2's 50,257 ids
    prepare.prepare(DataPrepConfig(path=str(tmp_path / "short"), dataset="tokenfile",
                                   tokenfile_size=100, tokenfile_vocab=2048))
    largest = json.loads((tmp_path / "gpt2" / "tokenfile" / "meta.json").read_text())["max_token_id"]
    for fields, line in [
        (dict(path=str(tmp_path / "gpt2")), f"vocab_size: gpt-tiny's vocab_size is 2048, but the "
         f"tokenfile's largest token id is {largest}: set model_args vocab_size to at least "
         f"{largest + 1}, or prepare the data with --tokenfile-vocab 2048"),
        (dict(path=str(tmp_path / "short")), "seq_len: 128 needs windows of 129 tokens, but the "
         "tokenfile's train.bin holds 100: lower seq_len or prepare more with --tokenfile-size"),
        (dict(path=str(tmp_path / "none")), f"path: {tmp_path / 'none'} has no tokenfile data; "
         f"run `python -m benchlib data --path {tmp_path / 'none'} --offline` first"),
    ]:
        cfg = TransformerTrainingConfig(device="cpu", dataset="tokenfile", **fields)
        with pytest.raises(UsageError) as caught:
            transformer_training.preflight(cfg)
        assert str(caught.value) == line
    capsys.readouterr()
    assert main(["run", "50_transformer_training", "-p", "dataset", "tokenfile", "-p", "path",
                 str(tmp_path / "gpt2"), "-p", "device", "cpu"]) == 2  # nothing launched
    assert capsys.readouterr().err.strip().endswith(f"vocab_size: gpt-tiny's vocab_size is 2048, "
                                                    f"but the tokenfile's largest token id is "
                                                    f"{largest}: set model_args vocab_size to at "
                                                    f"least {largest + 1}, or prepare the data "
                                                    "with --tokenfile-vocab 2048")


@pytest.mark.parametrize("fields, line", [
    (dict(), None),  # gpt-tiny on tokens under fsdp2: its blocks found in the model checked
    (dict(model="examples.custom_model:build", dataset="synthetic", seq_len=0,
          input_shape="3x32x32", num_classes=4, ac="selective", strategy="single",
          nproc_per_node=1),
     "ac: selective works block by block, and WideCNN has no blocks"),
])
def test_the_preflight_builds_the_users_model_once_for_all_its_checks(fields, line,
                                                                       monkeypatch):
    from benchlib.trainers import job

    built = []
    real = job.build_job
    monkeypatch.setattr(job, "build_job", lambda args: built.append(args) or real(args))
    cfg = TransformerTrainingConfig(device="cpu", **fields)
    if line is None:
        transformer_training.preflight(cfg)
    else:
        with pytest.raises(ConfigError, match=f"^{line}"):
            transformer_training.preflight(cfg)
    assert len(built) == 1


@pytest.mark.parametrize("fields, line", [
    (dict(precision="amp_fp16"), "precision: fsdp2 here runs fp32, tf32 or amp_bf16"),
    (dict(strategy="dp"), "strategy: 'dp' is not one of single, ddp, fsdp2"),
    (dict(ac="some"), "ac: 'some' is not one of none, selective, full"),
    (dict(model="resnet18"), "dataset: tokens feed a language model"),
    (dict(model="resnet18", dataset="tokenfile"), "dataset: tokenfile's ids feed a language model"),
    (dict(model="hf:gpt2", dataset="tokenfile", seq_len=0), "seq_len: hf:gpt2 needs seq_len for "
     "its windows of the tokenfile"),
    (dict(dataset="tokenfile", vocab_size=100), "vocab_size: declares synthetic data's shape; "
     "dataset is tokenfile"),
    (dict(dataset="synthetic", seq_len=0), "model: gpt-tiny is a language model"),
])
def test_the_config_refuses_what_is_not_a_transformer_run(fields, line):
    with pytest.raises(ConfigError) as caught:
        TransformerTrainingConfig(**fields)
    assert str(caught.value).startswith(line)


def test_the_worker_refuses_fsdp2_beside_dataparallels_devices():
    args = ddp_flags.parser("fsdp2").parse_args(["--model", "gpt-tiny", "--dataset", "tokens",
                                           "--dp-devices", "2"])
    with pytest.raises(ConfigError, match="dp_devices: is DataParallel's; fsdp2 runs one rank"):
        ddp_flags.check_args(args)


def test_mfu_is_the_analytic_count_over_the_published_peak():
    m = {"tokens_per_s": 2 * 400_000.0, "world_size": 2, "flops_per_token_analytic": 7.7e8,
         "device_name": "NVIDIA H100 80GB HBM3"}
    got = transformer_training.lm_figures(m, "amp_bf16")
    assert got["tokens_per_s_per_device"] == 400_000.0
    assert got["mfu"] == pytest.approx(400_000 * 7.7e8 / 989.4e12) and "H100" in got["mfu_peak_source"]
    cpu = transformer_training.lm_figures({**m, "device_name": "AMD EPYC"}, "fp32")
    assert cpu["mfu"] is None and cpu["mfu_peak_source"] == "no published peak for AMD EPYC at fp32"
    json.dumps(cpu)  # a record can hold it


def test_an_hf_or_own_model_gets_mfu_by_its_counted_flops_and_a_missing_one_its_true_reason():
    """On an H100 at amp_bf16 the peak is known: a model without the analytic count (an
    hf: or entry-point one) takes PyTorch's counted FLOPs, and says so; without any count
    the reason is the missing count, not a peak that is there."""
    m = {"tokens_per_s": 300_000.0, "world_size": 1, "flops_per_token": 9.1e8,
         "device_name": "NVIDIA H100 80GB HBM3"}
    got = transformer_training.lm_figures(m, "amp_bf16")
    assert got["mfu"] == pytest.approx(300_000 * 9.1e8 / 989.4e12) and got["mfu_flops"] == "counted"
    both = transformer_training.lm_figures({**m, "flops_per_token_analytic": 7.7e8}, "amp_bf16")
    assert both["mfu_flops"] == "analytic" and both["mfu"] == pytest.approx(300_000 * 7.7e8 / 989.4e12)
    none = transformer_training.lm_figures({**m, "flops_per_token": None}, "amp_bf16")
    assert none["mfu"] is None and none["mfu_flops"] is None
    assert none["mfu_peak_source"].startswith("no FLOP count for this model (peak: NVIDIA H100")


def test_the_analysis_says_what_each_checkpointing_mode_costs_and_saves():
    """Notebook 90's sentences from a frame: full checkpointing against none on the same
    strategy and ranks, five launches a side (a 95% interval over launches), its memory."""
    import pandas as pd

    from benchlib.analysis import transformer_training as lm

    def run(ac, launches, peak):
        return {"table": "t", "model": "gpt2-124m", "model_args": "{}", "seq_len": 1024,
                "batch_size": 8, "precision": "amp_bf16", "hardware": "H100", "strategy": "fsdp2",
                "world_size": 8, "ac": ac, "compile": False, "peak_mib": peak,
                "peak_kind": "cuda reserved, this window",
                "samples_per_s": sorted(launches)[2], "samples_per_s_launches": tuple(launches),
                "flop_count_ratio": 0.99, "mfu": 0.41, "mfu_peak_source": "H100 data sheet",
                "device_name": "NVIDIA H100"}
    frame = pd.DataFrame([run("none", [100, 101, 99, 100, 102], 60_000.0),
                          run("full", [75, 76, 74, 75, 77], 21_000.0)])
    text = lm.conclusions(frame)
    assert ("gpt2-124m, seq 1024, batch 8, amp_bf16, fsdp2 on 8 rank(s): tokens/s **no "
            "checkpointing x1.33 over ac full**") in text
    assert "peak memory 0.35x (cuda reserved, this window) without checkpointing" in text
    assert "A consistency check, not a finding: the analytic FLOPs per token" in text
    assert "counter agree within 1.0%" in text and "Best MFU 41.0%: fsdp2 on 8 ranks" in text
    off = lm.conclusions(frame.assign(flop_count_ratio=1.2))  # a count gone wrong: said so
    assert "**The FLOP counts DISAGREE** by 20.0%" in off and "consistency check" not in off


def test_cpu_memory_ratios_divide_the_models_own_bytes_not_the_interpreters():
    """On a CPU the peak RSS of a 5 MB model is mostly the interpreter and torch (some 0.7
    GiB): FSDP2 against DDP read 0.99x there. The model's own bytes (the RSS above what
    the process held before the model was built) show what sharding saved."""
    import pandas as pd

    from benchlib.analysis import transformer_training as lm

    def run(strategy, peak_mib, own_mib):
        return {"table": "t", "model": "gpt-tiny", "model_args": "{}", "seq_len": 128,
                "batch_size": 8, "precision": "fp32", "hardware": "cpu", "strategy": strategy,
                "world_size": 2, "ac": "none", "compile": False, "peak_mib": peak_mib,
                "peak_kind": "rss, this window", "model_mib": own_mib,
                "model_peak_kind": "rss above the baseline before the model was built",
                "samples_per_s": 10.0, "samples_per_s_launches": (10.0,),
                "flop_count_ratio": 1.0, "mfu": None, "mfu_peak_source": "no published peak "
                "for AMD EPYC at fp32", "device_name": "AMD EPYC"}
    text = lm.conclusions(pd.DataFrame([run("ddp", 905.0, 60.0), run("fsdp2", 900.0, 30.0)]))
    assert ("FSDP2's peak memory is 0.50x (the model's own bytes: rss above the baseline "
            "before the model was built) DDP's") in text
    assert "MFU is unknown here (no published peak for AMD EPYC at fp32)" in text
    older = lm.conclusions(pd.DataFrame([{**run("ddp", 905.0, None)},
                                         {**run("fsdp2", 900.0, 30.0)}]))
    assert "FSDP2's peak memory is 0.99x (rss, this window) DDP's" in older
