"""DDP on 2 ranks and one process with the global batch take the same steps."""

import pytest

from benchlib.launch.launcher import launch

pytestmark = pytest.mark.distributed


def common_args(data) -> list[str]:
    """The flags of the DDP comparison's two runs."""
    return ["--path", str(data), "--dataset", "mydataset", "--model", "toynet",
            "--no-shuffle", "--no-augment", "--max-steps", "6", "--warmup-steps", "1",
            "--record-losses", "6", "--lr", "0.5", "--device", "cpu", "--seed", "3"]


@pytest.fixture(scope="module")
def one_process_run(small_data, tmp_path_factory):
    """(its launch, its folder): one process with the global batch of 32, launched once and
    read by two tests: the DDP comparison (its losses) and the saved model (its train dir).
    Saving the model happens after the last step, so the losses are those of a run without
    --save-model."""
    folder = tmp_path_factory.mktemp("one-process")
    out = launch("single", [*common_args(small_data), "--batch-size", "32",
                            "--save-model", "--train-dir", str(folder / "ckpt")],
                 folder / "logs", "single")
    return out, folder


def test_ddp_matches_one_process_with_the_global_batch(small_data, tmp_path, one_process_run):
    single = one_process_run[0]
    # tcp ranks, not torchrun's: what the ranks compute is the subject, not the launcher
    ddp = launch("ddp", [*common_args(small_data), "--batch-size", "16"], tmp_path / "ddp",
                 "tcp", nproc=2)
    one, two = single.result["details"]["losses"], ddp.result["details"]["losses"]
    assert len(one) == len(two) == 6
    assert one[0] != one[-1]  # the model moved, so later steps test the averaged gradients
    # the same samples per step, gradients averaged by all_reduce: equal up to float32
    # summation order; stated tolerance: 1e-5 relative
    assert two == pytest.approx(one, rel=1e-5)


def test_dataparallel_on_a_cpu_machine_says_it_ran_as_one_device(small_data, tmp_path):
    out = launch("dp", ["--path", str(small_data), "--dataset", "mydataset", "--model",
                        "toynet", "--max-steps", "4", "--warmup-steps", "1",
                        "--device", "cpu"], tmp_path, "single")
    m = out.result["metrics"]
    assert m["devices"] == 1 and m["note"] == "DataParallel without GPUs: ran as one CPU device"


def test_save_model_writes_a_loadable_state_dict_to_train_dir(one_process_run):
    import torch

    from benchlib.core.models import ToyNet

    ckpt = one_process_run[1] / "ckpt"
    state = torch.load(ckpt / "model.pt")
    ToyNet().load_state_dict(state)  # every key and shape matches
    assert [p.name for p in ckpt.iterdir()] == ["model.pt"]  # no temp file left


def _worker(module: str, *args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", f"benchlib.workers.{module}", *args],
                          capture_output=True, text=True, timeout=120)


def test_nccl_without_cuda_is_one_line_before_any_rank_is_spawned(tmp_path):
    done = _worker("ddp", "--spawn", "2", "--backend", "nccl", "--device", "cpu",
                   "--dataset", "synthetic", "--log-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == "benchlib.workers.ddp: backend: nccl needs CUDA devices; use gloo on CPU\n"
    assert not list(tmp_path.iterdir())  # no rank started, no log written


def test_warmup_covering_max_steps_is_refused_before_training(tmp_path):
    done = _worker("single", "--dataset", "synthetic", "--model", "simplecnn", "--image-size", "32",
                   "--max-steps", "5", "--warmup-steps", "5", "--device", "cpu",
                   "--log-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == ("benchlib.workers.single: warmup_steps: 5 leaves no timed step of the "
                           "5 steps per epoch (max_steps); lower warmup_steps or raise max_steps\n")
    assert not list(tmp_path.iterdir())


def test_the_result_line_says_what_a_result_holds():
    from benchlib.launch.protocol import summary_line

    assert summary_line({"samples_per_s": 1234.5, "samples_per_s_n": 1, "step_s": 0.05,
                         "world_size": 4, "restarts": 1, "steps_redone": 3}) == (
        "result: 1,234.5 samples/s, step 0.05 s, 4 rank(s), 1 restart(s), 3 steps redone")
    assert summary_line({"samples_per_s": None}) == "result: no timed step (see the log above)"


def test_the_result_line_counts_what_its_spread_is_over():
    """The elastic trainer's samples/s is a median over steps, JAX's over repeats, the
    other trainers' over epochs: the line names which."""
    from benchlib.core.timing import PER_STEP, WINDOW
    from benchlib.launch.protocol import summary_line

    spread = {"samples_per_s": 100.0, "samples_per_s_p10": 90.0, "samples_per_s_p90": 110.0}
    assert summary_line({**spread, "samples_per_s_n": 12, "timing": PER_STEP}).startswith(
        "result: 100.0 samples/s (p10 90.0, p90 110.0, 12 steps)")
    assert summary_line({**spread, "samples_per_s_n": 3, "timing": WINDOW,
                         "framework": "jax"}).startswith(
        "result: 100.0 samples/s (p10 90.0, p90 110.0, 3 repeats)")
    assert summary_line({**spread, "samples_per_s_n": 3, "timing": WINDOW}).startswith(
        "result: 100.0 samples/s (p10 90.0, p90 110.0, 3 epochs)")


def test_every_trainer_builds_the_imagefolder_set_with_the_same_transforms(small_data):
    """One set of transforms per data set: the DDP/Lightning trainers' and the elastic
    trainer's ImageNet-layout sets agree, with and without augmentation, and evaluation
    resizes to 256 before its 224 crop (pytorch/examples' recipe)."""
    from benchlib.data import transforms
    from benchlib.trainers.job import build_dataset
    from benchlib.workers import elastic

    for augment in (True, False):
        ddp_set, _, shape = build_dataset("imagefolder", str(small_data), augment, 224)
        flags = [str(small_data), "--dataset", "imagefolder", "--image-size", "224",
                 *([] if augment else ["--no-augment"])]
        elastic_set = elastic.build_data(elastic.parser().parse_args(flags))[0]
        assert repr(ddp_set.transform) == repr(elastic_set.transform) \
            == repr(transforms.imagefolder(224, augment))
        assert ddp_set[0][0].shape == elastic_set[0][0].shape == (3, 224, 224) == shape
    evaluation = transforms.imagefolder(224, augment=False).transforms
    assert evaluation[0].size == 256 and evaluation[1].size == (224, 224)
