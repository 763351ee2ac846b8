"""repeat_mode: one sample of a row's spread is an epoch inside one launch, or a whole
launch (a fresh process per repeat, its figure the launch's median over its epochs)."""

import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from benchlib.config import DpVsDdpConfig, FrameworkComparisonConfig, MultinodeLightningConfig
from benchlib.errors import ConfigError
from benchlib.launch.launcher import LaunchResult
from benchlib.runs import params
from benchlib.studies import dp_vs_ddp, framework_comparison, multinode_lightning, repeats

# each fake launch's epochs: launch r runs at about 100 * (r + 1) samples/s
EPOCHS = [[100.0, 104.0, 98.0], [200.0, 190.0, 210.0], [300.0, 305.0, 295.0]]


class FakeLaunch:
    """Stands for launch(): records each call, returns launch r's epochs as a worker would."""

    def __init__(self, metrics=None):
        self.calls, self.jax, self.metrics = [], [], metrics or {}

    def __call__(self, module, args, log_dir, *a, **kw):
        if module == "jax_resnet":  # JAX's worker: flags, one window a launch
            self.jax.append(list(args))
            metrics = {"samples_per_s": 10.0 * len(self.jax), "step_s": 0.1, "compile_s": 2.0,
                       "timing": "window", "jax_version": "0", "jax_backend": "cpu",
                       "device_name": "cpu"}
            return LaunchResult(Path(log_dir), {"metrics": metrics, "details": {}}, 1.0)
        r = len(self.calls)
        self.calls.append((module, dict(args), Path(log_dir)))  # the worker's parameters
        epochs = [{"epoch": e, "samples_per_s": v, "epoch_s": 1.0, "batch_s": 0.1,
                   "data_s": 0.01, "compute_s": 0.09} for e, v in enumerate(EPOCHS[r])]
        metrics = {"samples_per_s": statistics.median(EPOCHS[r]), "world_size": 2,
                   "device_name": "cpu", "device_type": "cpu", "flops_per_sample": 1.0,
                   **self.metrics}
        return LaunchResult(Path(log_dir), {"metrics": metrics, "details": {"epochs": epochs}},
                            float(r + 1))


@pytest.fixture
def fake(monkeypatch):
    fake = FakeLaunch()
    for module in (dp_vs_ddp, multinode_lightning, framework_comparison):
        monkeypatch.setattr(module, "preflight", lambda cfg: None)
    monkeypatch.setattr(repeats, "launch", fake)  # the one loop every study's launches run by
    return fake


@pytest.mark.parametrize("config", [DpVsDdpConfig, MultinodeLightningConfig,
                                    FrameworkComparisonConfig])
def test_repeat_mode_takes_epoch_or_process_only(config):
    with pytest.raises(ConfigError, match="repeat_mode: 'launch' is not one of epoch, process"):
        config(repeat_mode="launch")


def test_a_bad_repeat_mode_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchlib", "run", "20_dp_vs_ddp", "-p",
                          "repeat_mode", "launch", "--outputs", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "benchlib run: run: repeat_mode: 'launch' is not one of epoch, process"]


def test_process_mode_launches_once_per_repeat_and_summarizes_over_launches(fake):
    cfg = DpVsDdpConfig(repeats=3, repeat_mode="process", epochs=3, dataset="synthetic")
    result = dp_vs_ddp.run(cfg, "t")
    assert len(fake.calls) == 3 and len({c[2] for c in fake.calls}) == 3  # a log folder each
    figures = [statistics.median(e) for e in EPOCHS]
    assert [x["samples_per_s"] for x in result.details["launches"]] == figures
    m = result.metrics
    assert m["samples_per_s"] == statistics.median(figures) and m["samples_per_s_n"] == 3
    assert (m["samples_per_s_min"], m["samples_per_s_max"]) == (min(figures), max(figures))
    assert [e["repeat"] for e in result.details["epochs"]] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert m["launches"] == 3 and m["launch_s"] == 2.0


def test_epoch_mode_pools_every_epoch(fake):
    result = dp_vs_ddp.run(DpVsDdpConfig(repeats=2, epochs=3, dataset="synthetic"), "t")
    pooled = EPOCHS[0] + EPOCHS[1]
    assert result.metrics["samples_per_s_n"] == 6
    assert result.metrics["samples_per_s"] == statistics.median(pooled)
    assert len(result.details["launches"]) == 2


def test_multinode_process_mode_counts_launches(fake):
    cfg = MultinodeLightningConfig(trainer="ddp", nnodes=1, nproc_per_node=2, repeats=3,
                                   repeat_mode="process", epochs=3)
    m = multinode_lightning.run(cfg, "t").metrics
    assert len(fake.calls) == 3 and m["samples_per_s_n"] == 3
    assert m["samples_per_s"] == statistics.median(statistics.median(e) for e in EPOCHS)


def test_framework_process_mode_launches_one_window_per_repeat(fake, monkeypatch):
    cfg = FrameworkComparisonConfig(repeats=3, repeat_mode="process", compare_jax=False)
    result = framework_comparison.run(cfg, "t")
    assert len(fake.calls) == 3
    assert all(c[1]["epochs"] == 1 for c in fake.calls)  # the worker's parameters (run.json)
    assert result.metrics["samples_per_s_n"] == 3
    fake.calls.clear()
    epoch = framework_comparison.run(FrameworkComparisonConfig(repeats=3, compare_jax=False), "t")
    assert len(fake.calls) == 1 and fake.calls[0][1]["epochs"] == 3
    assert epoch.metrics["samples_per_s_n"] == 3  # the windows of the one launch


def test_jax_beside_a_process_row_is_launched_per_repeat_too(fake):
    """JAX's launches follow the PyTorch ones, one window each in process mode, and the
    row's JAX figures are summarized over them."""
    cfg = FrameworkComparisonConfig(repeats=3, repeat_mode="process", dataset="synthetic",
                                    model="resnet18")
    m = framework_comparison.run(cfg, "t").metrics
    assert len(fake.calls) == 3 and len(fake.jax) == 3
    assert all(a[a.index("--repeats") + 1] == "1" for a in fake.jax)
    assert m["jax_skipped"] is None and m["jax_samples_per_s"] == 20.0
    assert m["jax_samples_per_s_n"] == 3 and m["jax_over_pytorch"] == pytest.approx(20.0 / 200.0)


def test_a_studys_launches_run_in_their_order_each_in_its_folder_its_fresh_one_emptied(
        fake, tmp_path):
    """The one loop: every launch in the order its study planned (notebook 55: eager and
    compiled interleaved, a warm row's priming launch first), each under its own log
    folder, a launch's `fresh` folder emptied before it starts."""
    from benchlib.config import CompileConfig
    from benchlib.studies import compile

    planned = compile.launches(CompileConfig(repeats=2, compile="default", compile_cache="warm"), "t")
    assert [(x.role, x.repeat, x.log) for x in planned] == [
        ("prime", 0, "prime"), ("eager", 0, "eager-0"), ("compiled", 0, "compiled-0"),
        ("compiled", 1, "compiled-1"), ("eager", 1, "eager-1")]
    cache = planned[0].params["compile_cache_to"]
    assert all(x.params.get("compile_cache_from") == cache for x in planned if x.role == "compiled")
    assert [x.params["seed"] for x in planned] == [0, 0, 0, 1, 1]
    old = tmp_path / "checkpoints"
    (old / "step-10").mkdir(parents=True)
    first = repeats.Launch("single", {"a": 1}, log="one", fresh=str(old))
    done = repeats.launch_all([first, repeats.Launch("ddp", {"b": 2}, "torchrun", 2, log="two")],
                              tmp_path / "logs")
    assert not old.exists() and [c[2] for c in fake.calls] == [tmp_path / "logs" / "one",
                                                               tmp_path / "logs" / "two"]
    assert [c[0] for c in fake.calls] == ["single", "ddp"] and len(done) == 2


@pytest.mark.parametrize("file", ["dp_vs_ddp_seed002.yaml", "multinode_lightning_seed000.yaml",
                                  "framework_comparison_seed003.yaml"])
def test_the_seed_tables_repeat_by_process(file):
    rows = params.load_plan(ROOT / "params" / file)
    assert rows and all(r.params["repeat_mode"] == "process" for r in rows)
    assert all(r.params["repeats"] >= 5 for r in rows)  # enough launches for a 95% CI


def test_every_study_plans_its_launches_and_one_loop_starts_them():
    """Every study module of the registry says what it launches (`launches(cfg)`, a list of
    Launch: none for the studies that measure in their kernel), and in the studies only
    repeats.launch_all calls launch()."""
    import ast
    import importlib

    from benchlib import studies
    from benchlib.config import studies as registry

    for entry in (s for s in registry.registry() if s.module):
        planned = importlib.import_module(entry.module).launches(studies.config_class(entry)())
        assert all(isinstance(x, repeats.Launch) for x in planned), entry.name
        assert planned == studies.launches(studies.config_class(entry)(), "interactive")
    callers = set()
    for path in sorted((ROOT / "benchlib" / "studies").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "benchlib.launch.launcher" \
                    and any(a.name == "launch" for a in node.names):
                callers.add(path.name)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "launch":
                callers.add(path.name)
    assert callers == {"repeats.py"}
