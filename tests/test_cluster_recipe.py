"""The cluster recipe (docs/cluster.md) works as written: the data is prepared where the rows will
look for it, and a Slurm sweep checks the data before it submits anything (no cluster
needed: the checks are called directly)."""

import re
import shlex
from pathlib import Path

import pytest

from benchlib import paths
from benchlib.cli import main
from benchlib.config import MultinodeLightningConfig
from benchlib.errors import UsageError
from benchlib.runs import slurm_sweep
from benchlib.runs.params import load_plan
from benchlib.studies import multinode_lightning

ROOT = Path(__file__).resolve().parent.parent


def recipe() -> list[list[str]]:
    """The commands of docs/cluster.md's "Running on your cluster" block, continuations joined."""
    text = (ROOT / "docs" / "cluster.md").read_text().split("# Running on your cluster")[1]
    block = re.search(r"```\n(.*?)```", text, re.S).group(1).replace("\\\n", " ")
    return [shlex.split(line) for line in block.splitlines() if line.strip()]


def test_the_recipe_prepares_the_data_where_its_rows_look(monkeypatch, tmp_path):
    commands = recipe()
    exports = dict(c[1].split("=", 1) for c in commands if c[0] == "export")
    monkeypatch.setenv("BENCHLIB_OUTPUTS", str(tmp_path / exports["BENCHLIB_OUTPUTS"].lstrip("/")))
    data = next(c for c in commands if c[3:4] == ["data"])
    prepared_at = paths.resolve(data[data.index("--path") + 1])
    dataset = data[data.index("--dataset") + 1]
    sweep = next(c for c in commands if c[3:4] == ["sweep"])
    rows = load_plan(ROOT / sweep[4])
    assert {(paths.resolve(r.params["path"]), r.params["dataset"]) for r in rows} == \
        {(prepared_at, dataset)}
    assert prepared_at == tmp_path / "shared/benchlib/outputs/data"


def test_benchlib_data_resolves_outputs_paths_as_the_rows_do(outputs, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the project root: `outputs/data` still goes to outputs
    assert main(["data", "--path", "outputs/data", "--dataset", "mydataset", "--offline",
                 "--size", "50"]) == 0
    assert (outputs / "data" / "manifest.json").exists()
    assert not (elsewhere / "outputs").exists()


def test_a_slurm_sweep_refuses_rows_whose_data_is_not_prepared(outputs, tmp_path):
    table = tmp_path / "mn.yaml"
    table.write_text("name: mn\nnotebook: notebooks/30_multinode_lightning.ipynb\n"
                     "defaults: {launcher: srun, dataset: mydataset, model: toynet, device: cpu,\n"
                     "           nnodes: 2, trainer: ddp, max_steps: 4, warmup_steps: 1}\n"
                     "table: [{batch_size: 8}, {batch_size: 16}]\n")
    rows = load_plan(table)
    with pytest.raises(UsageError) as refused:
        slurm_sweep.check_data(rows)
    message = str(refused.value)
    assert message.startswith(f"{table}: ") and "\n" not in message
    assert f"path: {outputs / 'data'} has no mydataset data" in message
    assert "checked before submitting" in message
    assert main(["data", "--path", "outputs/data", "--dataset", "mydataset", "--offline",
                 "--size", "50"]) == 0
    slurm_sweep.check_data(rows)  # prepared: nothing to say
    made = table.read_text().replace("mydataset", "synthetic").replace("toynet", "simplecnn")
    table.write_text(made)
    slurm_sweep.check_data(load_plan(table))  # synthetic data is made in the process


def test_a_slurm_sweep_does_not_ask_the_data_prep_row_for_the_data_it_makes(outputs):
    """The smoke table's first row prepares `dataset: all` under outputs/data, before any
    data is there: a submit-side check must not refuse it (nor the table with it)."""
    assert not (outputs / "data").exists()
    rows = [r for r in load_plan(ROOT / "params" / "smoke_cpu.yaml") if r.table == "data_prep"]
    assert rows and rows[0].params["dataset"] == "all"
    slurm_sweep.check_data(rows)


def test_an_srun_row_checks_its_data_where_it_runs(tmp_path):
    cfg = MultinodeLightningConfig(launcher="srun", dataset="mydataset", model="toynet",
                                   device="cpu", nnodes=2, path=str(tmp_path / "none"),
                                   max_steps=4, warmup_steps=1)
    with pytest.raises(UsageError, match=f"path: {tmp_path / 'none'} has no mydataset data"):
        multinode_lightning.preflight(cfg)
