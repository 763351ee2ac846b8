"""The largest batch that trains (benchlib.studies.memory_and_batch, `benchlib maxbatch`):
the search, the memory limit's forms, and real searches on the CPU against a limit."""

import json
import random

import pytest

from benchlib.cli import main
from benchlib.config import MemoryAndBatchConfig
from benchlib.config.memory_and_batch import parse_size
from benchlib.diagnose import rules
from benchlib.errors import ConfigError, LaunchError
from benchlib.records import results
from benchlib.studies import memory_and_batch
from benchlib.studies.batch_search import rate_bound, search, summary
from benchlib.studies.memory_and_batch import launches, size_text

MiB = 2**20


def noisy(limit, base=700 * MiB, per=9 * MiB, noise=12.5 * MiB, before_model=650 * MiB,
          seed=0, peaks=True):
    """A model of one trial in a fresh process: a peak of base + per x batch, moved by up
    to `noise` between processes (some 25 MiB of RSS here), over the limit: no fit. The
    process held `before_model` before the model was built. Without `peaks` a batch over
    the limit has none (CUDA's OutOfMemoryError)."""
    rng = random.Random(seed)

    def run(batch):
        peak = base + per * batch + rng.uniform(-noise, noise)
        fits = peak <= limit
        return {"batch_size": batch, "fits": fits, "samples_per_s": 10.0 * batch,
                "peak_bytes": int(peak) if fits or peaks else None,
                "baseline_bytes": before_model}
    return run


@pytest.mark.parametrize("seed", range(12))
def test_the_boundary_is_confirmed_by_three_processes_each_side_under_a_peak_that_moves(seed):
    """Under 1600 MiB a batch fits for certain up to 98 and never from 102; 99 to 101 fit
    in some processes. One trial a batch would answer anything in 98-101 and call it exact
    (maxbatch once said 98 fits; three reruns of 98 peaked over the limit)."""
    limit = 1600 * MiB
    largest, first, s = search(noisy(limit, seed=seed), 1, 4096, limit)
    assert all(t["fits"] for t in s.at(largest)) and len(s.at(largest)) >= 3
    assert not any(t["fits"] for t in s.at(first)) and len(s.at(first)) >= 3
    assert 98 <= largest < first <= 102
    between = range(largest + 1, first)
    assert all(s.at(b) and any(t["fits"] for t in s.at(b)) for b in between)
    # each batch aimed at the limit by the growth measured so far: no trial passes it by
    # more than a few samples' growth (200 seeds: 69 MiB at most, 28 at p90), where
    # doubling from 1 tries 128: 252 MiB over
    over = max(t["peak_bytes"] - limit for t in s.order if t["peak_bytes"] is not None)
    assert over < 8 * 9 * MiB
    assert len(s.order) <= 20
    m = summary(s, largest, first)
    assert m["margin_bytes"] == limit - max(t["peak_bytes"] for t in s.at(largest)) >= 0
    assert m["largest_batch_processes"] >= 3 and m["misfit_processes"] >= 3
    assert m["largest_batch_peak_min_bytes"] <= m["largest_batch_peak_bytes"]


def test_a_search_whose_misfits_have_no_peak_aims_by_the_fits_and_cudas_memory():
    """CUDA without a memory_limit: the limit is the device's memory, which the first
    trial says; a batch that runs out of memory has no peak to go by."""
    def run(batch):
        row = noisy(1600 * MiB, peaks=False, seed=3)(batch)
        return {**row, "device_total_bytes": 1600 * MiB, "baseline_bytes": 0}
    largest, first, s = search(run, 8, 4096, None)
    assert s.limit == 1600 * MiB and 98 <= largest < first <= 102 and len(s.order) <= 20


def test_the_cap_that_fits_is_confirmed_and_a_start_that_does_not_is_too():
    largest, first, s = search(noisy(10**12), 3, 20, 10**12)
    assert (largest, first) == (20, None) and len(s.at(20)) == 3
    assert [t["batch_size"] for t in s.order][:2] == [3, 20]  # aimed straight at the cap
    largest, first, s = search(noisy(100 * MiB), 8, 64, 100 * MiB)
    assert (largest, first) == (None, 8) and len(s.order) == 3


def test_a_largest_batch_that_fails_on_its_second_process_is_not_the_answer():
    """Batch 10 fits once, then not: the answer falls below it, and 10 is named as one
    that fits only sometimes."""
    runs = {10: iter([True, False, True])}

    def run(batch):
        fits = next(runs[batch]) if batch in runs else batch < 10
        return {"batch_size": batch, "fits": fits, "peak_bytes": None, "samples_per_s": 1.0}
    largest, first, s = search(run, 1, 64, None)
    assert largest == 9 and len(s.at(9)) == 3 and all(t["fits"] for t in s.at(9))
    assert first == 11 and len(s.at(11)) == 3
    assert summary(s, largest, first)["unreliable_batches"] == "10 (fit 1 of 2)"


@pytest.mark.parametrize("text, size", [("4GiB", 4 * 2**30), ("512MiB", 512 * 2**20),
                                        ("2GB", 2 * 10**9), ("1.5 GiB", 3 * 2**29),
                                        ("100B", 100), ("", None)])
def test_memory_limit_takes_binary_and_decimal_units(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["4", "4XB", "GiB", "-1GiB", "4 GiB extra", "0GiB"])
def test_a_memory_limit_without_a_known_unit_names_the_field_and_the_forms(text):
    with pytest.raises(ConfigError, match=r"memory_limit: .* is not a size; give a number and "
                       r"a unit: 4GiB, 512MiB, 2GB"):
        MemoryAndBatchConfig(memory_limit=text)


def test_the_search_takes_every_model_and_data_set_the_training_studies_take():
    """Notebook 15's model and data are the training studies' piece, and so are the
    performance settings: the trials' batches have the shape each data set gives."""
    assert MemoryAndBatchConfig().batch_shape() == (3, 32, 32)
    assert MemoryAndBatchConfig(dataset="imagefolder", image_size=96).batch_shape() == (3, 96, 96)
    assert MemoryAndBatchConfig(model="toynet", input_shape="1x28x28").batch_shape() == (1, 28, 28)
    resnet = MemoryAndBatchConfig(model="resnet50", dataset="imagefolder", precision="amp_bf16",
                                  channels_last=True, device="gpu")
    [trial] = launches(resnet, batch=64)
    assert (trial.params["precision"], trial.params["channels_last"]) == ("amp_bf16", True)
    for fields in ({"model": "gpt-tiny", "dataset": "tokens", "ac": "full", "compile": True},
                   {"model": "hf:gpt2", "dataset": "synthetic", "seq_len": 32, "vocab_size": 64,
                    "model_args": {"n_layer": 1, "n_embd": 32, "n_head": 2}},
                   {"model": "timm:resnet10t"},
                   {"model": "examples.custom_model:build", "model_args": {"width": 8},
                    "dataset": "examples.custom_data:shapes", "collate": "examples.custom_data:stack"}):
        assert MemoryAndBatchConfig(**fields).batch_shape() in ((), (3, 32, 32))
    with pytest.raises(ConfigError, match="model: toynet takes 1x28x28"):
        MemoryAndBatchConfig(model="toynet", dataset="cifar10")
    with pytest.raises(ConfigError, match="dataset: 'tokenfile' is not one of .*: the search "
                                          "measures memory, not IO; give tokens"):
        MemoryAndBatchConfig(model="gpt-tiny", dataset="tokenfile")
    with pytest.raises(ConfigError, match="confirm: must be >= 3, got 2"):
        MemoryAndBatchConfig(confirm=2)


@pytest.mark.parametrize("fields, line", [
    ({"model": "examples.custom_model:build", "model_args": {"num_classes": 4}},
     "model: 'examples.custom_model:build' gives (2, 4) outputs for a batch of 2, but the "
     "data's labels go up to 9"),
    ({"model": "timm:resnet10t", "start_batch": 1},
     "start_batch: timm:resnet10t does not train on a batch of 1: Expected more than 1 value "
     "per channel when training"),
    ({"model": "resnet18", "ac": "full"}, "ac: full works block by block, and ResNet has no "
     "blocks"),
    ({"model": "gpt-tiny", "dataset": "tokens", "precision": "amp_fp16"},
     "precision: amp_fp16 needs a CUDA GPU"),
])
def test_what_cannot_be_searched_is_one_line_from_the_preflight(fields, line):
    cfg = MemoryAndBatchConfig(device="cpu", memory_limit="1GiB", **fields)
    with pytest.raises(ConfigError) as e:
        memory_and_batch.preflight(cfg)
    assert str(e.value).startswith(line)


@pytest.mark.parametrize("argv, says", [
    (["--memory-limit", "4XB"], "'4XB' is not a size; give a number and a unit: 4GiB, 512MiB"),
    ([], "the CPU search needs a limit"),
])
def test_bad_memory_limit_is_one_line_naming_the_flag_exit_2_and_nothing_written(
        outputs, capsys, argv, says):
    assert main(["maxbatch", "--model", "simplecnn", "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("benchlib maxbatch: --memory-limit: ") \
        and says in err[0]
    assert not outputs.exists() or not any(outputs.rglob("*.json"))


def test_a_trial_the_os_killed_is_a_row_that_does_not_fit_and_other_failures_stay_failures():
    cfg = MemoryAndBatchConfig(device="cpu", memory_limit="1GiB")
    row = memory_and_batch._killed_row(cfg, 64, LaunchError("killed", 0, "h", -9, None))
    assert row["fits"] is False and row["batch_size"] == 64 and "killed by the OS" in row["why"]
    assert memory_and_batch._killed_row(cfg, 64, LaunchError("bug", 0, "h", 1, None)) is None


def test_a_cuda_library_that_cannot_allocate_is_a_batch_that_does_not_fit_not_a_failure():
    """On an H200, ResNet-50's batch 1702 failed in cuBLAS's handle creation while 1704
    raised OutOfMemoryError: the search stopped with a traceback (run 5 of the GPU check)."""
    import torch

    from benchlib.workers.batch_trial import out_of_memory

    seen = ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
    assert out_of_memory(RuntimeError(seen))
    assert out_of_memory(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))
    assert out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: "
                                      "can't allocate memory: you tried to allocate 9 bytes"))
    assert not out_of_memory(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not out_of_memory(ValueError("CUBLAS_STATUS_ALLOC_FAILED"))


def test_the_sentence_names_both_ends_their_processes_the_margin_and_the_batches_between():
    m = {"largest_batch": 12, "smallest_batch_not_fitting": 14, "largest_batch_processes": 3,
         "misfit_processes": 3, "largest_batch_samples_per_s": 9.4,
         "largest_batch_peak_min_bytes": 990 * MiB, "largest_batch_peak_bytes": 1011 * MiB,
         "misfit_peak_min_bytes": 1030 * MiB, "misfit_peak_max_bytes": 1051 * MiB,
         "limit_bytes": 2**30, "margin_bytes": 13 * MiB, "unreliable_batches": "13 (fit 1 of 2)",
         "largest_batch_fails_at_most": rate_bound(3), "peak_spread_bytes": 21 * MiB,
         "growth_bytes_per_sample": 20 * MiB}
    assert memory_and_batch.boundary_sentence(m, 64) == (
        "The largest batch that trains is 12, in all of 3 processes (peaks 990 MiB-1011 MiB, "
        "13 MiB (1.3%) under the limit; 9.4 samples/s): that supports a failure in at most 63% "
        "of fresh processes (95%); but its margin is below the 21 MiB a peak moved between "
        "processes at one batch here, so a rerun may not fit: for a margin of that spread take "
        "a smaller batch (about 1 samples fewer, by the growth measured here: an estimate, not "
        "confirmed), or confirm with more processes; batch 14 does not fit in 1024 MiB in any "
        "of 3 processes (peaks 1030 MiB-1051 MiB); between them, 13 (fit 1 of 2).")
    wide = memory_and_batch.boundary_sentence({**m, "margin_bytes": 30 * MiB}, 64)
    assert "at most 63% of fresh processes (95%); batch 14" in wide and "rerun" not in wide
    assert size_text(1536 * MiB) == "1536 MiB" and size_text(139 * 2**30) == "139 GiB"


@pytest.mark.parametrize("confirm, bound", [(3, 0.632), (10, 0.259)])
def test_the_failure_rate_the_answer_states_holds_on_the_noise_model(confirm, bound):
    """200 searches under the noise model above (1600 MiB: batch 98 never fails, 99 in 14%
    of processes, 100 in half, 101 in 86%): "fits in all of k" states a failure in at most
    1 - 0.05^(1/k) of fresh processes, and the batch answered fails more often than that in
    at most 5% of the searches (3 of 3 alone answered 99 most of the time: it did fail in
    14% of processes, which the old "in all of 3 processes" let a reader take as never)."""
    limit, base, per, noise = 1600 * MiB, 700 * MiB, 9 * MiB, 12.5 * MiB

    def fails(batch):  # the true share of fresh processes over the limit at `batch`
        return min(1.0, max(0.0, (base + per * batch + noise - limit) / (2 * noise)))
    over, answers = 0, set()
    for seed in range(200):
        largest, first, s = search(noisy(limit, seed=seed), 1, 4096, limit, confirm)
        m = summary(s, largest, first)
        assert m["largest_batch_fails_at_most"] == pytest.approx(bound, abs=1e-3)
        over += fails(largest) > m["largest_batch_fails_at_most"]
        answers.add(largest)
    assert over <= 10 and 99 in answers


def test_the_searchs_sentence_names_the_compile_mode_only_when_it_compiles():
    """compile is a mode ("off" by default): "off" once read as compiled, being a string."""
    done = memory_and_batch.BatchSearch({"device_name": "cpu", "batches_tried": 1, "trials": 3,
                                         "boundary": "The largest batch that trains is 8."}, {})
    smoke = {"model": "toynet", "input_shape": "1x28x28", "memory_limit": "2GiB"}
    eager = MemoryAndBatchConfig(**smoke)
    assert memory_and_batch.describe(eager, done) == (
        "toynet (fp32) on cpu, 1x28x28 inputs, 1 batch in 3 processes: The largest batch "
        "that trains is 8.")
    compiled = MemoryAndBatchConfig(**smoke, compile="default")
    assert "toynet (fp32, compile default) on cpu" in memory_and_batch.describe(compiled, done)


# ------------------------------------------------------------- real searches on the CPU

# 224x224 inputs: SimpleCNN's activations take some 35 MiB a sample here, above the noise
# of peak RSS (25 MiB between processes on a quiet host, 80 beside a busy suite)
SHAPE = ["--model", "simplecnn", "--dataset", "imagefolder", "--device", "cpu", "--steps", "2"]


def one_trial(cfg, batch, tmp_path):
    from benchlib.launch.launcher import launch

    [trial] = launches(cfg, batch=batch)
    out = launch(trial.worker, trial.params, tmp_path / f"trial-{batch}", "single", 1, timeout_s=300)
    return out.result["details"]["trial"]


@pytest.mark.distributed
def test_cpu_search_under_a_memory_limit_confirms_both_ends_and_states_the_margin(
        outputs, tmp_path, capsys):
    """Batches 2 and 8 measured first, one process each; then a limit halfway between
    their peaks. The largest batch fits in each of 3 fresh processes, under the limit by
    the margin the record states; the first batch that does not fit fails in each of 3;
    a batch between fits in some process (a peak moves between processes). Every trial
    that fits says what its memory held at its peak, the interpreter left out."""
    cfg = MemoryAndBatchConfig(model="simplecnn", dataset="imagefolder", device="cpu",
                               memory_limit="64GiB", steps=2)
    p2, p8 = (one_trial(cfg, b, tmp_path)["peak_bytes"] for b in (2, 8))
    assert (p8 - p2) / 6 > 8 * MiB
    limit = int((p2 + p8) / 2)

    argv = ["maxbatch", *SHAPE, "--memory-limit", f"{limit}B", "--start-batch", "2",
            "--max-batch", "8"]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    [record] = [json.loads(p.read_text()) for p in (outputs / "results").rglob("*.json")]
    assert record["status"] == "ok" and record["study"] == "memory_and_batch"
    m, trials = record["metrics"], record["details"]["trials"]
    largest, first = m["largest_batch"], m["smallest_batch_not_fitting"]
    at = {b: [t for t in trials if t["batch_size"] == b] for b in {t["batch_size"] for t in trials}}
    assert largest is not None and first is not None and largest < first <= 8
    assert len(at[largest]) >= 3 and all(t["fits"] and t["peak_bytes"] <= limit
                                         for t in at[largest])
    assert len(at[first]) >= 3 and all(not t["fits"] and "over the limit" in t["why"]
                                       for t in at[first])
    assert all(any(t["fits"] for t in at[b]) for b in range(largest + 1, first))
    assert m["margin_bytes"] == limit - max(t["peak_bytes"] for t in at[largest]) >= 0
    assert m["trials"] == len(trials) and m["largest_batch_processes"] == len(at[largest])
    assert f"The largest batch that trains is {largest}, in all of {len(at[largest])} " \
        "processes" in out and f"batch {first} does not fit in" in out
    fit = at[largest][0]
    assert fit["breakdown_kind"] == "at the peak of one profiled step (torch.profiler's memory " \
        "timeline)"
    assert fit["param_bytes"] > 0 and fit["optimizer_state_bytes"] == fit["param_bytes"]
    assert fit["activation_bytes"] > 8 * MiB * largest  # some 35 MiB a sample
    assert 0 < fit["model_peak_bytes"] < fit["peak_bytes"] - 200 * MiB  # not the interpreter
    df = results.load_results(outputs / "results")
    assert list(df["status"]) == ["ok"] and df["largest_batch"].iloc[0] == largest
    # the report's bottleneck: the largest batch's steps, all compute (a busy host named first)
    assert m["step_figures_of"].startswith(f"batch {largest}, the largest that fits (median of "
                                           f"{len(at[largest])} processes")
    assert m["compute_s"] == m["batch_s"] > 0 == m["data_s"]
    assert rules.column(record) in ("compute-bound", "host-contended")


@pytest.mark.distributed
def test_a_trial_takes_a_language_model_in_its_precision_with_checkpointing(tmp_path):
    """gpt-tiny on tokens, amp_bf16 (the CPU has it), full activation checkpointing: the
    row says what ran and what the memory held at its peak."""
    cfg = MemoryAndBatchConfig(model="gpt-tiny", dataset="tokens", seq_len=64, device="cpu",
                               memory_limit="64GiB", precision="amp_bf16", ac="full", steps=2)
    memory_and_batch.preflight(cfg)
    row = one_trial(cfg, 4, tmp_path)
    assert row["fits"] and row["samples_per_s"] > 0, row["why"]
    assert row["model_class"] == "benchlib.core.gpt.GPT" and row["grad_bytes_at_peak"] >= 0
    assert row["model_source"] == "benchlib/core/gpt.py; model_args"


@pytest.mark.distributed
def test_a_compiled_trial_records_its_cold_compile_and_its_graph_break(tmp_path, monkeypatch):
    """A compiled trial compiles in a cache of its own (cold, never what an earlier process
    left): its row says what the compile cost (its warm-up steps less as many timed ones),
    its graph break and recompiles; the search's record takes them at its largest batch,
    with no break-even (no eager trial beside it). A warm search is refused."""
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no pool of compile processes
    fields = dict(model="tests.compile_models:blocks_with_break", dataset="synthetic",
                  input_shape="3x8x8", device="cpu", memory_limit="64GiB", compile="default",
                  steps=4, warmup_steps=2)
    row = one_trial(MemoryAndBatchConfig(**fields), 4, tmp_path)
    assert row["fits"] and row["compile_cache"] == "cold" and row["compile_s"] > 0
    assert row["compile_s_of"] == "the first 2 step(s) less 2 x the timed steps' mean"
    assert row["graph_breaks"] == 1 and row["recompiles"] >= 0 and row["cache_misses"] > 0
    found = search(lambda b: {**row, "batch_size": b, "fits": b <= 4}, 4, 5, 2**36, 1)[2]
    m = memory_and_batch.compile_figures(found, 4)
    assert (m["compile_s"], m["graph_breaks"], m["break_even_steps"], m["break_even_why"]) == (
        row["compile_s"], 1, None, "no eager row of the same work in this row")
    with pytest.raises(ConfigError, match="compile_cache: warm: each trial compiles cold"):
        memory_and_batch.preflight(MemoryAndBatchConfig(**{**fields, "compile_cache": "warm"}))


@pytest.mark.notebook
def test_notebook_15_runs_and_publishes_its_search(outputs):
    args = ["run", "15_memory_and_batch", "-p", "device", "cpu", "-p", "dataset", "imagefolder",
            "-p", "image_size", "64", "-p", "memory_limit", "64GiB", "-p", "start_batch", "2",
            "-p", "max_batch", "2", "-p", "steps", "2", "--study", "memory"]
    assert main(args) == 0
    [rec] = results.load_results(outputs / "results").to_dict("records")
    assert rec["status"] == "ok" and rec["study"] == "memory_and_batch"
    assert rec["largest_batch"] == 2 and rec["largest_batch_processes"] == 3
    assert rec["boundary"].startswith("The largest batch that trains is 2, in all of 3")


@pytest.mark.distributed
def test_a_model_and_data_set_of_your_own_are_searched_with_their_arguments(tmp_path):
    """Their arguments reach every trial (the batch_trial worker's flags are notebook 15's
    fields): a trial of width 8 holds exactly the parameter bytes of width 8, not of the
    default width 32 nor of width 64 (counted here, in this process: one trial process
    instead of one per width), at a batch larger than the user's data set, its items
    batched by the user's collate."""
    from examples.custom_model import build

    def param_bytes(width):
        return sum(p.numel() * p.element_size() for p in build(width, 4).parameters())

    base = dict(model="examples.custom_model:build", dataset="examples.custom_data:shapes",
                collate="examples.custom_data:stack", device="cpu", memory_limit="64GiB", steps=2)
    for width in (8, 64):
        memory_and_batch.preflight(MemoryAndBatchConfig(**base, model_args={"width": width,
                                                                            "num_classes": 4}))
    cfg = MemoryAndBatchConfig(**base, model_args={"width": 8, "num_classes": 4})
    trial = one_trial(cfg, 600, tmp_path / "8")  # more than its 512 items
    assert trial["fits"], trial["why"]
    assert trial["model_class"] == "examples.custom_model.WideCNN"
    assert trial["param_bytes"] == param_bytes(8) != param_bytes(32)
    assert param_bytes(64) > 10 * trial["param_bytes"]


def test_a_start_batch_that_fits_in_one_process_of_two_is_neither_answer():
    runs = {8: iter([False, True, False])}

    def run(batch):
        fits = next(runs[batch]) if batch in runs else batch < 8
        return {"batch_size": batch, "fits": fits, "peak_bytes": None, "samples_per_s": 1.0}
    largest, first, s = search(run, 8, 64, 100)
    m = summary(s, largest, first)
    assert (largest, first, m["misfit_processes"]) == (None, 9, 3)
    assert memory_and_batch.boundary_sentence({**m, "limit_bytes": 2**30}, 64) == (
        "No batch tried fits in 1024 MiB in every process: batch 9 does not fit in 1024 MiB "
        "in any of 3 processes (peak unknown); below it, 8 (fit 1 of 2).")

