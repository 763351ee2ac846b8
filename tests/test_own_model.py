"""A model, data set and loss of the user's own (issue: "your model, your data"): named by
entry point (`pkg.module:function`), or a timm/transformers model built from its config;
checked before any rank starts, one line naming the parameter and exit 2, nothing written.
The sweep through notebooks 20 and 40 is in test_study_sweeps.py."""

import argparse
import json
import os
import subprocess
import sys

import pytest
import torch

from benchlib.cli import main
from benchlib.config import DpVsDdpConfig, FrameworkComparisonConfig
from benchlib.core import entrypoints
from benchlib.errors import ConfigError
from benchlib.slurm.sbatch import training_script
from benchlib.studies import checks
from benchlib.trainers import ddp_flags
from benchlib.trainers.job import build_job

MODEL, DATA = "examples.custom_model:build", "examples.custom_data:shapes"


def job_args(**given) -> argparse.Namespace:
    """A training worker's parsed flags (the training fields' defaults), with `given`."""
    argv = []
    for name, value in given.items():
        argv += [f"--{name.replace('_', '-')}",
                 json.dumps(value) if isinstance(value, dict) else str(value)]
    return ddp_flags.parser("single").parse_args(argv)


def test_the_example_model_and_data_build_into_a_job_that_says_what_it_is():
    job = build_job(job_args(model=MODEL, model_args={"width": 8}, dataset=DATA))
    job.check(MODEL)
    assert job.shape == (3, 32, 32) and len(job.dataset) == 512
    assert job.described["model_class"] == "examples.custom_model.WideCNN"
    assert job.described["model_params"] == 1452 and len(job.described["model_source_sha"]) == 16
    x, y = job.batch(4, seed=0)
    assert x.shape == (4, 3, 32, 32) and y.tolist() == [0, 1, 2, 3]  # the data set's own items
    # three 3x3 convolutions of width 8 on 32, 16 and 8 pixels and the head: forward and
    # backward (3x), but the first layer needs no gradient of its input (2x)
    first, rest = 2 * 9 * 3 * 8 * 32 * 32, 2 * 9 * (8 * 8 * 16 * 16 + 8 * 8 * 8 * 8) + 2 * 8 * 4
    assert job.flops_per_sample() == pytest.approx(2 * first + 3 * rest, rel=0.01)


def test_a_loss_of_ones_own_is_what_a_step_minimises():
    job = build_job(job_args(model=MODEL, dataset=DATA,
                             loss="examples.custom_model:smoothed_cross_entropy"))
    x, y = job.batch(8, seed=0)
    smoothed = job.objective(job.model, x, y)
    plain = torch.nn.functional.cross_entropy(job.model(x), y)
    assert smoothed.item() != pytest.approx(plain.item())  # label smoothing moves it
    assert smoothed.item() == pytest.approx(torch.nn.functional.cross_entropy(
        job.model(x), y, label_smoothing=0.1).item())


def test_synthetic_data_of_a_declared_shape_and_a_language_model_on_tokens():
    images = build_job(job_args(model="simplecnn", dataset="synthetic", input_shape="1x16x16",
                                num_classes=3))
    x, y = images.batch(5, seed=1)
    assert x.shape == (5, 1, 16, 16) and int(y.max()) <= 2
    lm = build_job(job_args(model="hf:gpt2", dataset="synthetic", seq_len=16, vocab_size=100,
                            model_args={"n_layer": 1, "n_head": 2, "n_embd": 32}))
    x, y = lm.batch(3, seed=0)
    assert x.shape == y.shape == (3, 16) and int(x.max()) < 100
    assert lm.described["tokens_per_sample"] == 16
    assert lm.model.config.vocab_size == 100  # the data's ids are its vocabulary
    assert lm.objective(lm.model, x, y).item() == pytest.approx(torch.log(torch.tensor(100.)).item(),
                                                                rel=0.1)  # untrained: ~ln V


@pytest.mark.parametrize("given, line", [
    (dict(model="examples.nowhere:build"), "model: 'examples.nowhere:build': module examples."
     "nowhere is not importable here"),
    (dict(model="examples.custom_model:nothing"), "model: 'examples.custom_model:nothing': "
     "examples.custom_model has no nothing"),
    (dict(model="examples.custom_data:SHAPES"), "model: 'examples.custom_data:SHAPES' is a "
     "tuple, not callable"),
    (dict(model=DATA), "model: 'examples.custom_data:shapes' returned a Shapes, not a "
     "torch.nn.Module"),
    (dict(model=MODEL, model_args={"depth": 3}), "model_args: 'examples.custom_model:build' "
     "does not take these arguments ['depth']"),
    (dict(model=MODEL, model_args={"num_classes": 2}, dataset=DATA),
     "model: 'examples.custom_model:build' gives (2, 2) outputs for a batch of 2, but the "
     "data's labels go up to 3"),
    (dict(model=MODEL, model_args={"in_channels": 1}, dataset=DATA),
     "model: 'examples.custom_model:build' does not train on this data (input (2, 3, 32, 32), "
     "labels (2,)): RuntimeError"),
    (dict(dataset=MODEL), "dataset: 'examples.custom_model:build' returned a WideCNN, not a "
     "map-style torch.utils.data.Dataset"),
    (dict(model="timm:no_such_net", input_shape="3x32x32"), "model: timm 1."),
    (dict(model="hf:no_such_type", seq_len=8, vocab_size=10), "model: transformers "),
    (dict(model="hf:gpt2", seq_len=4096, vocab_size=10), "seq_len: 4096 is longer than "
     "hf:gpt2's 1024 positions"),
])
def test_a_model_or_data_set_that_cannot_train_is_one_line_naming_the_parameter(given, line):
    args = job_args(**{"dataset": "synthetic", "input_shape": "3x32x32", **given})
    with pytest.raises(ConfigError) as caught:
        job = build_job(args)
        job.check(args.model)
    assert str(caught.value).startswith(line) and "\n" not in str(caught.value)


def test_an_item_that_is_not_tensors_names_the_data_set(tmp_path, monkeypatch):
    (tmp_path / "words.py").write_text("def build():\n    return [('a', 0), ('b', 1)]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"dataset: item 0 of 'words:build' is \(str, int\); "
                                          r"each item must be \(input, label\)"):
        build_job(job_args(model=MODEL, dataset="words:build"))


@pytest.mark.parametrize("fields, line", [
    (dict(model="resnet50:"), "model: 'resnet50:' is not one of toynet"),
    (dict(model="toynet", model_args={"width": 3}), "model_args: toynet is built in"),
    (dict(collate="examples.custom_data:shapes"), "collate: only a data set of your own"),
    (dict(loss="not an entry"), "loss: 'not an entry' is not an entry point"),
    (dict(dataset="synthetic", input_shape="3x32"), None),  # a shape of two dimensions is one
    (dict(dataset="synthetic", input_shape="3*32*32"), "input_shape: '3*32*32' is not a shape"),
    (dict(dataset="synthetic", seq_len=16), "vocab_size: synthetic tokens need both"),
    (dict(dataset="cifar10", seq_len=16, vocab_size=9), "seq_len: declares synthetic data's shape"),
    (dict(dataset="synthetic", model="hf:gpt2"), "model: hf:gpt2 is a language model"),
])
def test_the_config_refuses_what_cannot_be_a_model_or_data_set(fields, line):
    if line is None:
        DpVsDdpConfig(**fields)
        return
    with pytest.raises(ConfigError) as caught:
        DpVsDdpConfig(**fields)
    assert str(caught.value).startswith(line)


def test_notebook_40_takes_any_model_and_names_why_jax_is_not_beside_it():
    cfg = FrameworkComparisonConfig(model="timm:resnet10t", image_size=32)
    from benchlib.studies import framework_comparison

    assert framework_comparison.jax_skipped(cfg).startswith("JAX trains the built-in ResNets")
    with pytest.raises(ConfigError, match="model: toynet takes 1x28x28 inputs"):
        FrameworkComparisonConfig(model="toynet")


def test_a_bad_model_in_a_notebook_row_exits_2_before_any_rank_and_writes_nothing(tmp_path, capsys):
    code = main(["run", "20_dp_vs_ddp", "-p", "model", "examples.custom_model:absent", "-p",
                 "dataset", "synthetic", "-p", "device", "cpu", "--outputs", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "model: 'examples.custom_model:absent': " \
        "examples.custom_model has no absent" in err[0]
    assert not (tmp_path / "out").exists()


def test_the_row_preflight_counts_a_data_set_of_ones_own_without_a_manifest():
    cfg = DpVsDdpConfig(model=MODEL, dataset=DATA, device="cpu", batch_size=256, warmup_steps=2)
    assert checks.own_code_trains(cfg) == 512  # two steps of 256: none left after the warm-up
    with pytest.raises(ConfigError, match="warmup_steps: 2 leaves no timed step: an epoch here "
                                          "has 2 steps"):
        checks.steps_fit(cfg, cfg.batch_size, checks.own_code_trains(cfg))


def test_the_slurm_script_checks_on_every_node_that_the_users_code_imports(tmp_path):
    text = training_script("ddp", 2, 1, ["--model", MODEL, "--dataset", DATA, "--model-args",
                                         '{"width": 8}'], str(tmp_path / "log"),
                           check_capacity=False)
    line = next(li for li in text.splitlines() if "benchlib.core.entrypoints" in li)
    assert line.startswith("srun --nodes 2 --ntasks-per-node 1 ") and line.endswith(
        f"-m benchlib.core.entrypoints model={MODEL} dataset={DATA} || exit 2")
    assert text.index(line) < text.index("benchlib.launch.agent")  # before the ranks start
    # what that line runs, here: the example imports; a missing module is one line, exit 2
    ok = subprocess.run([sys.executable, "-m", "benchlib.core.entrypoints", f"model={MODEL}",
                         f"dataset={DATA}"], cwd="/", capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "benchlib.core.entrypoints",
                          "model=examples.gone:build"], cwd="/", capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "model: 'examples.gone:build': module examples.gone is not importable" in bad.stderr


def test_the_worker_takes_model_args_as_json_and_refuses_anything_else(capsys):
    assert job_args(model_args={"width": 4}).model_args == {"width": 4}
    with pytest.raises(SystemExit) as leaving:
        ddp_flags.parser("single").parse_args(["--model-args", "[1, 2]"])
    assert leaving.value.code == 2
    assert "--model-args: '[1, 2]' is not a JSON object" in capsys.readouterr().err


def test_the_model_identity_covers_the_builder_its_classes_and_model_args_not_torch(
        tmp_path, monkeypatch):
    """A builder that returns torch's nn.Sequential: the builder's file is what changes
    when the user edits it (the class's file is torch's); model_args count; torch's
    version does not (a torch upgrade is the stack's), a model library's does."""
    import importlib.metadata

    from benchlib.core import models

    module = tmp_path / "netmod.py"
    module.write_text("import torch\ndef build(width=2):\n    return torch.nn.Sequential("
                      "torch.nn.Linear(2, width))\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def identity(args=None):
        sys.modules.pop("netmod", None)
        model = models.build_model("netmod:build", model_args=args or {})
        return entrypoints.model_identity("netmod:build", model, args)
    first = identity()
    assert first["model_source"] == f"{module}; model_args"
    assert identity({"width": 3})["model_source_sha"] != first["model_source_sha"]
    module.write_text(module.read_text().replace("(2, width)", "(2, width, bias=False)"))
    edited = identity()
    assert edited["model_source_sha"] != first["model_source_sha"]

    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda d: "9.9.9" if d in ("torch", "timm") else real_version(d))
    assert identity() == edited  # torch 9.9.9: the same model
    timm = models.build_model("timm:resnet10t", (3, 32, 32))
    assert entrypoints.model_identity("timm:resnet10t", timm, {})["model_source"] == \
        "timm 9.9.9; model_args"


def test_the_model_identity_follows_the_users_helper_modules_and_not_the_other_models_of_a_file(
        tmp_path, monkeypatch):
    """models.py holds two models and imports the user's own layers.py (and torch, math):
    an edit to a helper in layers.py that the model uses changes its identity (before:
    only the builder's and classes' files were hashed, so it did not); an edit to the
    other model in models.py does not (before: the whole file was hashed, so it did);
    an edit to a constant the model reads does."""
    from benchlib.core import models

    (tmp_path / "layers.py").write_text(
        "import torch\n\ndef act(x):\n    return torch.relu(x)\n\n"
        "def unused(x):\n    return x\n")
    (tmp_path / "zoo.py").write_text(
        "import math\nimport torch\nfrom layers import act\n\nWIDTH = 4\n\n"
        "class Mine(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(2, WIDTH)\n\n    def forward(self, x):\n"
        "        return act(self.fc(x))\n\n"
        "class Other(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
        "def build():\n    return Mine()\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def identity():
        for name in ("zoo", "layers"):
            sys.modules.pop(name, None)
        model = models.build_model("zoo:build")
        return entrypoints.model_identity("zoo:build", model, {})["model_source_sha"]

    edits = iter(range(1, 100))

    def edit(file, old, new):  # a later mtime each time: an edit within one clock tick too
        path = tmp_path / file
        path.write_text(path.read_text().replace(old, new))
        stamp = path.stat().st_mtime + next(edits)
        os.utime(path, (stamp, stamp))
    first = identity()
    edit("zoo.py", "return x * 2", "return x * 3")  # the other model
    edit("layers.py", "return x\n", "return x + 1\n")  # a helper nobody uses
    assert identity() == first
    edit("layers.py", "torch.relu(x)", "torch.tanh(x)")  # the model's own helper
    second = identity()
    assert second != first
    edit("zoo.py", "WIDTH = 4", "WIDTH = 5")
    assert identity() != second


def test_an_item_that_raises_in_the_preflight_is_the_data_sets_error_not_the_models(
        tmp_path, monkeypatch, capsys):
    """Item 17 of the user's data set raises; the label scan reads items 0 to 255: the
    row ends there, naming the data set and the item, never `model: ... does not train`."""
    (tmp_path / "badrow.py").write_text(
        "import torch\n\nclass Rows(torch.utils.data.Dataset):\n    def __len__(self):\n"
        "        return 64\n\n    def __getitem__(self, i):\n        if i == 17:\n"
        "            raise ValueError('row 17 has 3 columns, not 4')\n"
        "        return torch.zeros(3, 8, 8), i % 10\n\ndef build():\n    return Rows()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["run", "20_dp_vs_ddp", "-p", "model", MODEL, "-p", "dataset", "badrow:build",
                 "-p", "device", "cpu", "--outputs", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].endswith("dataset: item 17 of 'badrow:build' raised ValueError: row 17 has "
                           "3 columns, not 4"), err
    assert not (tmp_path / "out").exists()


def test_a_library_is_named_from_its_own_metadata_and_the_map_of_every_file_only_if_need_be(
        monkeypatch):
    """Every training process names its model's libraries: torch is found by its module's
    name alone (the map of every installed file cost 0.25-1 CPU s a process); PyYAML,
    imported as yaml, still through the map."""
    import importlib.metadata

    def no_map():
        raise AssertionError("the map of every installed file was read")

    entrypoints._distributions.cache_clear()
    with monkeypatch.context() as m:
        m.setattr(importlib.metadata, "packages_distributions", no_map)
        assert entrypoints.library("torch.nn.modules.linear", None) == \
            f"torch {importlib.metadata.version('torch')}"
    entrypoints._distributions.cache_clear()
    assert entrypoints.library("yaml", None) == f"PyYAML {importlib.metadata.version('PyYAML')}"
    assert entrypoints.library("collections", None).startswith("collections (python ")


def test_a_data_set_set_up_lazily_sets_up_in_each_worker_and_its_start_up_is_the_first_batch(
        tmp_path, monkeypatch):
    """Issue 52: the model check read the data set object in the rank process before the
    DataLoader's workers forked, so they inherited its opened handle (a fork-unsafe one
    shared by all) and its set-up never showed in first_batch_s. Now the check reads an
    instance of its own in a process of its own: each worker sets up, the rank never."""
    from benchlib.launch.launcher import launch

    handles, setup_s = tmp_path / "handles.txt", 1.5
    monkeypatch.setenv("BENCHLIB_EXAMPLE_HANDLES", str(handles))
    monkeypatch.setenv("BENCHLIB_EXAMPLE_SETUP_S", str(setup_s))
    out = launch("single", ["--dataset", "examples.lazy_data:lazy", "--model", "simplecnn",
                            "--num-workers", "2", "--batch-size", "8", "--max-steps", "6",
                            "--warmup-steps", "1", "--epochs", "1", "--device", "cpu",
                            "--no-comm-timer"], tmp_path / "logs", "single")
    opened = [line.split() for line in handles.read_text().splitlines()]
    rank_pid = out.result["pid"] if "pid" in out.result else None
    where = sorted(w for _, w in opened)
    # the probe's own process set up once (the model check's batch), then each worker once;
    # never the rank process that forks the workers
    assert where == ["0", "1", "main"], opened
    probe_pid = next(int(pid) for pid, w in opened if w == "main")
    worker_pids = {int(pid) for pid, w in opened if w != "main"}
    assert probe_pid not in worker_pids and (rank_pid is None or probe_pid != rank_pid)
    assert out.result["metrics"]["first_batch_s"] >= setup_s
