"""DDP on 2 ranks and one process with the global batch take the same steps."""

import pytest

from benchlib.launch.launcher import launch

pytestmark = pytest.mark.distributed


def test_ddp_matches_one_process_with_the_global_batch(small_data, tmp_path):
    common = ["--path", str(small_data), "--dataset", "mydataset", "--model", "toynet",
              "--no-shuffle", "--no-augment", "--max-steps", "6", "--warmup-steps", "1",
              "--record-losses", "6", "--lr", "0.5", "--device", "cpu", "--seed", "3"]
    single = launch("single", [*common, "--batch-size", "32"], tmp_path / "single", "single")
    ddp = launch("ddp", [*common, "--batch-size", "16"], tmp_path / "ddp", "torchrun", nproc=2)
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


def test_save_model_writes_a_loadable_state_dict_to_train_dir(small_data, tmp_path):
    import torch

    from benchlib.core.models import ToyNet

    launch("single", ["--path", str(small_data), "--dataset", "mydataset", "--model",
                      "toynet", "--max-steps", "3", "--warmup-steps", "1", "--device", "cpu",
                      "--save-model", "--train-dir", str(tmp_path / "ckpt")],
           tmp_path / "logs", "single")
    state = torch.load(tmp_path / "ckpt" / "model.pt")
    ToyNet().load_state_dict(state)  # every key and shape matches
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["model.pt"]  # no temp file left
