"""The committed notebooks: clean in git, consistent with benchlib, and they run. Notebook
00's run and the report over it, a failed run's included, are read in
tests/test_report_site.py from the runs its site is built of (one launch serves both)."""

import re

import nbformat
import pytest
from conftest import ROOT, TRIVIAL

from benchlib.cli import main
from benchlib.config import CONFIGS
from benchlib.config import studies as registry
from benchlib.core import envinfo
from benchlib.errors import ConfigError
from benchlib.records import results
from benchlib.report import publish
from benchlib.runs.params import NotebookSpec

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + [TRIVIAL]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_has_no_outputs_and_one_parameters_cell(path):
    nb = nbformat.read(path, 4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    # plain typed values, one per line, each commented
    for line in tagged[0].source.splitlines():
        assert re.fullmatch(r"\w+: (int|float|str|bool|dict|list\[\w+\]) = .+  # .+", line), line


@pytest.mark.notebook
def test_report_with_no_runs_says_how_to_make_some(outputs):
    page = publish.build(outputs).read_text()
    assert "No runs yet" in page
    assert "No records yet" in (outputs / "report" / "analysis.html").read_text()


@pytest.mark.notebook
def test_cli_report_prints_the_index_path(outputs, capsys):
    assert main(["report", "--no-analysis"]) == 0
    assert capsys.readouterr().out.strip() == f"report: {outputs / 'report' / 'index.html'}"


def _measured(outputs, run_id, study, notebook, params, metrics):

    results.write_record(outputs / "results", results.make_record(
        run_id=run_id, table=study, notebook=notebook, params=params, env=envinfo.collect(),
        started_at=results.now(), status="ok", metrics=metrics))


@pytest.mark.notebook
def test_scaling_projection_notebook_runs_without_records_and_from_measured_ones(outputs, capsys):
    assert main(["run", "45_scaling_projection", "--study", "projection"]) == 0
    [seed] = results.load_results(outputs / "results").to_dict("records")
    assert seed["status"] == "ok" and seed["stops_at_devices"] == 8 and seed["stops_by"] == "input"
    from benchlib.core.stats import median_abs_error
    from benchlib.projection import check_seed003  # the record holds the check's own figure

    expected = median_abs_error(check_seed003.check_dlperf()["error_%"])
    assert seed["check_median_abs_error_pct"] == pytest.approx(expected)
    _measured(outputs, "aaaaaaaaaaa1", "framework", "40_framework_comparison.ipynb",
              {"arch": "resnet18", "dataset": "synthetic", "precision": "fp32",
               "channels_last": False, "compile": False, "batch_size": 8, "nproc_per_node": 1},
              {"samples_per_s": 8.0, "world_size": 1, "model_params": 11_689_512,
               "threads_per_rank": 2, "device_name": "cpu"})
    _measured(outputs, "bbbbbbbbbbb1", "dp_ddp", "20_dp_vs_ddp.ipynb",
              {"strategy": "ddp", "model": "pyramidnet", "batch_size": 32, "nproc_per_node": 2},
              {"samples_per_s": 100.0, "world_size": 2, "busbw_gbps": 1.5})
    args = ["run", "45_scaling_projection", "--study", "projection", "-p", "compute", "newest",
            "-p", "intra_busbw", "newest", "-p", "inter_busbw", '"1"', "-p", "input_ceiling",
            "none", "-p", "devices_per_node", "2", "-p", "host_cores", "2", "-p", "model",
            "resnet18"]
    assert main(args) == 0
    latest = results.load_results(outputs / "results", "projection", latest=True)
    [here] = latest[latest["compute"] == "newest"].to_dict("records")  # not the seed-only row
    assert here["compute_source"] == ("run aaaaaaaaaaa1 (40_framework_comparison: resnet18 on "
                                      "synthetic, batch 8, on cpu)")
    # asked for a model no record measured: the newest of another, named as such
    other = [a if a != "resnet18" else "resnet50" for a in args]
    assert main(other) == 0
    latest = results.load_results(outputs / "results", "projection", latest=True)
    [there] = latest[(latest["model"] == "resnet50") & (latest["compute"] == "newest")].to_dict(
        "records")
    assert there["compute_source"] == ("run aaaaaaaaaaa1 (40_framework_comparison: resnet18 on "
                                       "synthetic, batch 8, on cpu); no record of resnet50, so "
                                       "the projection is of this run's model")
    assert here["stops_at_devices"] == 2 and here["stops_by"] == "shared cores"
    assert main([a if a != "none" else "newest" for a in args]) == 1  # no IO record to read
    df = results.load_results(outputs / "results", "projection")
    [failed] = df[df["status"] == "failed"].to_dict("records")
    assert failed["error"].startswith(
        "input_ceiling: no record that measures it under the results folder; run notebook 10")
    # the landing page's thumbnail of the projection is drawn from the runs it projects
    from benchlib.report import publish

    capsys.readouterr()
    publish.build(outputs, analysis=False)
    assert "no figure beside" not in capsys.readouterr().err
    assert list((outputs / "report" / "figures").glob("scaling_projection-*.png"))


STUDY_NOTEBOOKS = [p for p in NOTEBOOKS if p != TRIVIAL]


@pytest.mark.parametrize("study", registry.STUDIES, ids=lambda s: s.name)
def test_each_registry_entry_names_modules_that_hold_what_it_promises(study):
    """The registry is the source: its entry's notebook exists and takes its config (whose
    `study` is the entry's name), its study module has `run` (and `preflight` where the
    entry says so), its analysis module the four functions notebook 90 and the report call,
    and params/<study>_*.yaml are its tables. No notebook names a config of its own."""
    import importlib

    path = ROOT / "notebooks" / study.notebook
    spec = NotebookSpec.read(path)
    assert spec.config == study.config and CONFIGS[study.config].study == study.name
    assert "benchlib" not in nbformat.read(path, 4).metadata  # the registry says it, once
    if study.module:
        module = importlib.import_module(study.module)
        assert callable(module.run)
        assert hasattr(module, "preflight") == study.preflight
    else:
        assert not study.preflight
    if study.analysis:
        analysis = importlib.import_module(study.analysis)
        for name in ("runs", "headline", "section"):
            assert callable(getattr(analysis, name)), f"{study.analysis}.{name}"
        assert hasattr(analysis, "ABOUT")
    assert registry.of_notebook(study.notebook) == study.name
    names = {s.name for s in registry.STUDIES}
    for file in (ROOT / "params").glob("*.yaml"):
        if file.name != "smoke_cpu.yaml":  # one row of every study
            assert any(file.stem.startswith(f"{s}_") for s in names), file.name


def test_the_study_registry_lists_every_notebook_once_in_reading_order():
    assert [s.notebook for s in registry.STUDIES] == sorted(p.name for p in STUDY_NOTEBOOKS)
    with pytest.raises(ConfigError, match="study: 'io' is not a study; studies: data_prep, "
                       "single_device_io, memory_and_batch, dp_vs_ddp"):
        registry.named("io")


@pytest.mark.parametrize("path", STUDY_NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_ends_with_what_to_read_next_and_why(path):
    last = nbformat.read(path, 4).cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("Read `")
    assert last.source.count(". ") == 0 and ": " in last.source  # one sentence, with its why


PLOT = re.compile(r"\bsns\.\w+\(|\.plot\(|plt\.subplots\(")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_plot_a_notebook_draws_has_a_title_and_axis_labels(path):
    """Published pages are read by people who never ran the code: a cell that draws sets a
    title and its axes' labels (images excepted, which have no axes), with units in the
    labels where the quantity has one."""
    for cell in nbformat.read(path, 4).cells:
        src = cell.source
        if cell.cell_type != "code" or not PLOT.search(src):
            continue
        assert re.search(r"title=|set_title\(|suptitle\(", src), f"{path.name}: no title in\n{src}"
        if "imshow" not in src:
            assert re.search(r"[xy]label=|set_[xy]label\(|set_axis_labels\(", src), \
                f"{path.name}: no axis labels in\n{src}"
        for unit_label in re.findall(r"ylabel=\"([^\"]+)\"", src):
            assert re.search(r"\(|/s|^$|step|loss", unit_label), f"{path.name}: {unit_label!r} has no unit"
