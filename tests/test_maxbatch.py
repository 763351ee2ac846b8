"""The largest batch that trains (benchlib.studies.memory_and_batch, `benchlib maxbatch`):
the search, the memory limit's forms, and real searches on the CPU against a limit."""

import json

import pytest

from benchlib.cli import main
from benchlib.config import MemoryAndBatchConfig
from benchlib.config.memory_and_batch import parse_size
from benchlib.errors import ConfigError, LaunchError
from benchlib.records import results
from benchlib.studies import memory_and_batch
from benchlib.studies.memory_and_batch import search, size_text


def tried_with(boundary):
    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= boundary
    return tried, fits


def test_search_doubles_then_bisects_to_the_exact_boundary():
    tried, fits = tried_with(37)
    assert search(fits, 1, 4096) == (37, 38)
    assert tried == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]


def test_search_stops_at_the_cap_when_the_cap_fits():
    tried, fits = tried_with(10_000)
    assert search(fits, 3, 20) == (20, None)
    assert tried == [3, 6, 12, 20]


def test_search_says_when_not_even_the_first_batch_fits():
    tried, fits = tried_with(0)
    assert search(fits, 8, 64) == (None, 8) and tried == [8]


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


def test_toynet_searches_on_its_own_28x28_inputs():
    assert MemoryAndBatchConfig(model="toynet").input_shape() == (1, 28, 28)
    assert MemoryAndBatchConfig(dataset="imagefolder").input_shape() == (3, 224, 224)
    with pytest.raises(ConfigError, match="model: toynet takes 1x28x28"):
        MemoryAndBatchConfig(model="toynet", dataset="cifar10")


@pytest.mark.parametrize("argv, says", [
    (["--memory-limit", "4XB"], "'4XB' is not a size; give a number and a unit: 4GiB, 512MiB"),
    ([], "the CPU search needs a limit"),
])
def test_bad_memory_limit_is_one_line_naming_the_flag_exit_2_and_nothing_written(
        outputs, capsys, argv, says):
    assert main(["maxbatch", "--model", "toynet", "--device", "cpu", *argv]) == 2
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


def test_the_sentence_names_the_limit_and_the_first_batch_that_does_not_fit():
    m = {"largest_batch": 12, "smallest_batch_not_fitting": 13,
         "largest_batch_samples_per_s": 9.4, "largest_batch_peak_bytes": 1_060_000_000,
         "limit_bytes": 2**30}
    assert memory_and_batch.boundary_sentence(m, 64) == (
        "The largest batch that trains is 12 (9.4 samples/s, peak 1011 MiB); it does not "
        "fit in 1 GiB at batch 13.")
    assert size_text(1536 * 2**20) == "1.5 GiB"


# ------------------------------------------------------------- real searches on the CPU

# 224x224 inputs: SimpleCNN's activations take some 35 MiB a sample here, far above the
# noise of peak RSS, so a limit between two batches separates them for certain
SHAPE = ["--model", "simplecnn", "--dataset", "imagefolder", "--device", "cpu", "--steps", "2"]


@pytest.mark.distributed
def test_cpu_search_under_a_memory_limit_finds_the_boundary_and_records_the_misfits(
        outputs, capsys):
    """First 2, 4 and 8 under a limit nothing reaches (the cap fits: the boundary lies
    above), which gives the peak's growth per sample over 6 samples; then a limit halfway
    from batch 2's peak to batch 8's: 2 fits, 8 does not, doubling stops at the first batch
    over it (4 or 8) and bisection finds the boundary below. The largest batch fits, the
    next one up was tried and does not, and the misfits are rows of an ok record. Each end
    is 3 samples (some 100 MiB) from the limit: batch 4's peak moves by some 25 MiB between
    processes, quiet, and more beside a busy suite (a limit 1.5 samples above batch 4 once
    failed a fresh clone, and one 2 samples below batch 8 let batch 8 fit in a suite run)."""
    cfg = MemoryAndBatchConfig(model="simplecnn", dataset="imagefolder", device="cpu",
                               memory_limit="64GiB", start_batch=2, max_batch=8, steps=2)
    probe = memory_and_batch.run(cfg, "probe")
    assert probe.metrics["largest_batch"] == 8 and probe.metrics["smallest_batch_not_fitting"] is None
    assert "it is the max_batch cap (8)" in probe.metrics["boundary"]
    p2, _, p8 = (t["peak_bytes"] for t in probe.details["trials"])
    per_sample = (p8 - p2) / 6
    assert per_sample > 8 * 2**20
    limit = int((p2 + p8) / 2)

    argv = ["maxbatch", *SHAPE, "--memory-limit", f"{limit}B", "--start-batch", "2",
            "--max-batch", "8"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    [record] = [json.loads(p.read_text()) for p in (outputs / "results").rglob("*.json")]
    assert record["status"] == "ok" and record["study"] == "memory_and_batch"
    m, trials = record["metrics"], {t["batch_size"]: t for t in record["details"]["trials"]}
    largest = m["largest_batch"]  # 2 to 7 as measured above; a busy host moves a peak by
    # tens of MiB between processes, so the test asks what holds whatever was measured
    assert largest is not None and largest < 8 and m["smallest_batch_not_fitting"] == largest + 1
    assert trials[largest]["fits"] and trials[largest]["peak_bytes"] <= limit
    assert not trials[largest + 1]["fits"] and trials[largest + 1]["peak_bytes"] > limit
    assert "over the limit" in trials[largest + 1]["why"]
    assert 8 not in trials or not trials[8]["fits"]  # not tried when 4 is already over
    assert len(trials) >= 3  # doubling, then bisection
    assert trials[largest]["samples_per_s"] > 0
    assert trials[largest]["param_bytes"] > 0 and trials[largest]["optimizer_state_bytes"] \
        == trials[largest]["param_bytes"]  # SGD momentum: one buffer per parameter
    assert f"does not fit in {size_text(limit)} at batch {largest + 1}." in out
    df = results.load_results(outputs / "results")
    assert list(df["status"]) == ["ok"] and df["largest_batch"].iloc[0] == largest


@pytest.mark.notebook
def test_notebook_15_runs_and_publishes_its_search(outputs):
    args = ["run", "15_memory_and_batch", "-p", "device", "cpu", "-p", "dataset", "imagefolder",
            "-p", "memory_limit", "64GiB", "-p", "start_batch", "2", "-p", "max_batch", "2",
            "-p", "steps", "2", "--study", "memory"]
    assert main(args) == 0
    [rec] = results.load_results(outputs / "results").to_dict("records")
    assert rec["status"] == "ok" and rec["study"] == "memory_and_batch"
    assert rec["largest_batch"] == 2 and rec["boundary"].startswith("The largest batch")


def test_a_model_of_your_own_that_does_not_give_a_score_per_class_is_refused_in_one_line():
    """Notebook 15 takes the model vocabulary of the training studies: a model of your own
    with its arguments, checked on 2 samples of the batches' shape before any trial."""
    cfg = MemoryAndBatchConfig(model="examples.custom_model:build", device="cpu",
                               memory_limit="1GiB", model_args={"num_classes": 4})
    with pytest.raises(ConfigError, match=r"^model: examples.custom_model:build gives \(2, 4\) "
                                          r"for 2 images of 3x32x32; training needs \(2, >= 10\)"):
        memory_and_batch.preflight(cfg)
    with pytest.raises(ConfigError, match="model: 'gpt-tiny' is not one of toynet, simplecnn"):
        MemoryAndBatchConfig(model="gpt-tiny")


@pytest.mark.distributed
def test_a_model_of_your_own_is_searched_with_its_arguments(outputs):
    """Its arguments reach every trial (the batch_trial worker's flags are notebook 15's
    fields): width 8 against width 64 of the same model, at the same batch."""
    base = dict(model="examples.custom_model:build", device="cpu", memory_limit="64GiB",
                start_batch=2, max_batch=2, steps=2)
    figures = {}
    for width in (8, 64):
        cfg = MemoryAndBatchConfig(**base, model_args={"width": width, "num_classes": 10})
        memory_and_batch.preflight(cfg)
        [trial] = memory_and_batch.run(cfg, f"own-{width}").details["trials"]
        assert trial["fits"], trial["why"]
        figures[width] = trial["param_bytes"]
    assert figures[64] > 10 * figures[8]
