"""The committed notebooks: clean in git, consistent with benchlib, and they run."""

import dataclasses
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
        assert re.fullmatch(r"\w+: (int|float|str|bool|list\[\w+\]) = .+  # .+", line), line


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p != TRIVIAL], ids=lambda p: p.name)
def test_notebook_parameters_match_its_config_fields_and_defaults(path):
    spec = NotebookSpec.read(path)
    config = CONFIGS[spec.config]
    fields = {f.name: f.default for f in dataclasses.fields(config)}
    assert spec.defaults() == fields


@pytest.mark.notebook
def test_data_prep_and_analysis_notebooks_run_and_the_report_publishes(tmp_path, outputs):
    data_dir = tmp_path / "data"
    args = ["run", "00_data_prep", "-p", "path", str(data_dir), "-p", "offline", "true",
            "-p", "size", "200", "-p", "fashion_size", "300", "--study", "data_prep"]
    assert main(args) == 0
    rec = results.load_results(outputs / "results").iloc[0]
    assert rec["status"] == "ok"
    assert rec["fashion_mnist_source"] == "generated" and rec["fashion_mnist_samples"] == 350
    assert rec["mydataset_samples"] == 200 and (data_dir / "manifest.json").exists()

    index = publish.build(outputs)
    page = index.read_text()
    assert page.index('<h2 id="findings">') < page.index('<h2 id="analysis">') \
        < page.index('<h3 id="runs-data_prep">')
    assert "Study <code>data_prep</code>. 1 runs: 1 ok, 0 failed." in page
    analysis = (outputs / "report" / "analysis.html").read_text()
    assert "**1 runs**" not in analysis and "1 runs</strong> in 1 studies" in analysis
    assert "generated offline" in analysis
    assert "from benchlib import" not in analysis  # code is hidden
    run_page = outputs / "report" / "data_prep" / f"{rec['run_id']}.html"
    assert run_page.exists() and "results.publish" not in run_page.read_text()
    assert "<img" in run_page.read_text()  # the sample image grid


@pytest.mark.notebook
def test_report_marks_failed_runs_and_links_their_notebooks(tmp_path, outputs):
    main(["run", str(TRIVIAL), "-p", "fail", "true", "--study", "broken"])
    page = publish.build(outputs, analysis=False).read_text()
    assert '<span class="failed">failed</span>' in page
    assert "asked to fail with x=0" in page
    link = re.search(r'href="(broken/\w+\.html)"', page).group(1)
    assert "ValueError" in (outputs / "report" / link).read_text()


@pytest.mark.notebook
def test_report_with_no_runs_says_how_to_make_some(outputs):
    page = publish.build(outputs).read_text()
    assert "No runs yet" in page
    assert "No records yet" in (outputs / "report" / "analysis.html").read_text()


@pytest.mark.notebook
def test_cli_report_prints_the_index_path(outputs, capsys):
    assert main(["report", "--no-analysis"]) == 0
    assert capsys.readouterr().out.strip() == f"report: {outputs / 'report' / 'index.html'}"


@pytest.mark.notebook
def test_io_notebook_sweep_feeds_the_analysis_conclusions(tmp_path, outputs, small_data):
    file = tmp_path / "io.yaml"
    file.write_text(f"""
studies:
  - name: io_workers
    notebook: 10_single_device_io
    defaults: {{path: {small_data}, device: cpu, dataset: mydataset, repeats: 2, warmup_steps: 1}}
    grid: {{num_workers: [0, 1]}}
  - name: io_variants
    notebook: 10_single_device_io
    defaults: {{path: {small_data}, device: cpu, mode: traverse, repeats: 2, warmup_steps: 1,
               profile: true}}
    grid: {{variant: [raw, preload]}}
""")
    assert main(["sweep", str(file), "--no-progress"]) == 0
    df = results.load_results(outputs / "results")
    assert len(df) == 4 and set(df["status"]) == {"ok"}
    assert (df["samples_per_s"] > 0).all()
    executed = nbformat.read(outputs / df.iloc[0]["executed_notebook"], 4)
    assert not [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]

    publish.build(outputs)
    analysis = (outputs / "report" / "analysis.html").read_text()
    assert "fastest with <strong>num_workers=" in analysis
    cpu = envinfo.cpu_model()  # a record names the CPU's model, never just "cpu"
    assert re.search(rf"FashionMNIST traverse on {re.escape(cpu)} \(1 ep\): (no clear difference "
                     r"between|<strong>(preload|raw) x[\d.]+ over)", analysis)
    assert "raw takes <strong>" in analysis and "seed 000 measured 15.9x" in analysis
    assert f"fashion-mnist, traverse (1 ep, s, {cpu})" in analysis  # the seed-shaped table


@pytest.mark.notebook
def test_dp_ddp_notebook_sweep_gives_speedup_and_busbw_in_the_analysis(tmp_path, outputs, small_data):
    file = tmp_path / "dist.yaml"
    file.write_text(f"""
name: dp_ddp
notebook: 20_dp_vs_ddp
defaults: {{path: {small_data}, device: cpu, dataset: cifar10, model: pyramidnet, depth: 8,
           alpha: 12, batch_size: 8, max_steps: 4, warmup_steps: 1, epochs: 2}}
table:
  - {{strategy: single, nproc_per_node: 1}}
  - {{strategy: ddp, launcher: torchrun, nproc_per_node: 2, allreduce: true,
     allreduce_max_bytes: 65536}}
  - {{strategy: ddp, launcher: torchrun, nproc_per_node: 2, epochs: 1, repeats: 2,
     repeat_mode: process}}
""")
    assert main(["sweep", str(file), "--no-progress"]) == 0
    df = results.load_results(outputs / "results")
    process = df[df["repeat_mode"] == "process"].iloc[0]
    assert process["samples_per_s_n"] == 2 and process["launches"] == 2  # one value a launch
    ddp = df[(df["strategy"] == "ddp") & (df["repeat_mode"] == "epoch")].iloc[0]
    assert ddp["world_size"] == 2 and ddp["global_batch"] == 16 and ddp["busbw_gbps"] > 0
    assert (outputs / "logs" / ddp["run_id"] / "train" / "rank1.log").exists()

    publish.build(outputs)
    analysis = (outputs / "report" / "analysis.html").read_text()
    assert "<strong>DDP via torchrun</strong> on 2 device(s)" in analysis
    assert "<strong>speedup " in analysis and "Seed 002 on two P100s" in analysis
    assert "over 2 epochs of one launch" in analysis and "over 2 launches" in analysis


@pytest.mark.notebook
def test_framework_notebook_rows_scale_and_sit_beside_seed_003(tmp_path, outputs):
    file = tmp_path / "fw.yaml"
    file.write_text("""
name: framework
notebook: 40_framework_comparison
defaults: {device: cpu, arch: resnet18, dataset: synthetic, image_size: 32, batch_size: 4,
           skip_steps: 1, warmup_steps: 1, timed_steps: 3, repeats: 2}
grid: {nproc_per_node: [1, 2]}
""")
    assert main(["sweep", str(file), "--no-progress"]) == 0
    df = results.load_results(outputs / "results")
    assert set(df["world_size"]) == {1, 2} and df["mfu"].isna().all()
    assert (df["flops_per_sample"] > 0).all() and (df["lr"] == df["nproc_per_node"] * 4 / 1000).all()
    one, two = df[df["nproc_per_node"] == 1].iloc[0], df[df["nproc_per_node"] == 2].iloc[0]
    # the one-device row's notebook, the one with JAX beside it (record order follows the
    # run ids, which change with the testbed's commit)
    executed = nbformat.read(outputs / one["executed_notebook"], 4)
    text = "".join(str(o) for c in executed.cells for o in c.get("outputs", []))
    assert f"PyTorch here ({envinfo.cpu_model()}, fp32)" in text and "OneFlow" in text
    assert one["jax_backend"] == "cpu" and one["jax_samples_per_s"] > 0  # measured live
    assert "JAX " in text and "here (cpu, fp32)" in text
    assert two["jax_skipped"] == "JAX is measured on one device with synthetic data only"

    publish.build(outputs)
    analysis = (outputs / "report" / "analysis.html").read_text()
    assert "fp32 on 2 devices: speedup" in analysis and "Seed 003 (PyTorch 1.6, V100" in analysis
    assert "MFU is unknown here" in analysis
    assert "on the same machine, same ResNet and timing (1 row(s)): <strong>" in analysis


@pytest.mark.notebook
def test_multinode_and_fault_tolerance_notebooks_feed_the_analysis(tmp_path, outputs, small_data):
    file = tmp_path / "mn.yaml"
    file.write_text(f"""
studies:
  - name: multinode
    notebook: 30_multinode_lightning
    defaults: {{path: {small_data}, device: cpu, dataset: mydataset, model: toynet,
               batch_size: 16, epochs: 2, max_steps: 6, warmup_steps: 2}}
    table:
      - {{trainer: ddp, launcher: torchrun, nnodes: 1}}
      - {{trainer: ddp, launcher: torchrun, nnodes: 2}}
      - {{trainer: lightning, launcher: lightning, nnodes: 2}}
  - name: fault
    notebook: 35_fault_tolerance
    defaults: {{path: {small_data}, device: cpu, dataset: mydataset, model: toynet,
               max_steps: 8, epochs: 1, fail_at_step: 6, checkpoint_every: 4}}
    table: [{{nproc_per_node: 2}}]
""")
    assert main(["sweep", str(file), "--no-progress"]) == 0
    df = results.load_results(outputs / "results")
    mn = df[df["table"] == "multinode"].set_index(["trainer", "nnodes"])
    assert mn.loc[("ddp", 2), "world_size"] == 2 and mn.loc[("lightning", 2), "world_size"] == 2
    assert mn.loc[("lightning", 2), "cluster_environment"] == "LightningEnvironment"
    fault = df[df["table"] == "fault"].iloc[0]
    assert fault["restarts"] == 1 and fault["steps_redone"] == 2  # killed after 6, resumed at 4
    assert fault["loss_diff"] <= 1e-6 * max(abs(fault["loss_last"]), 1)

    publish.build(outputs)
    analysis = (outputs / "report" / "analysis.html").read_text()
    assert "<strong>ddp</strong> via torchrun on 2 node(s) x 1" in analysis
    assert mn.loc[("lightning", 2), "topology"] == "one host"  # both "nodes" ran here
    assert re.search(r"2 x 1: (no clear difference between|<strong>(Lightning|raw DDP) x[\d.]+ "
                     r"over)", analysis)  # Lightning against raw DDP, same layout
    assert "(2 x 1) put every node on one host" in analysis  # the loopback caveat
    assert "Steps redone stayed within restarts x (checkpoint_every - 1)" in analysis
    assert "passed before the restarted ranks were ready" in analysis
    assert "1 restart(s), 2 step(s) redone" in analysis
    assert "it ended at the same loss as the uninterrupted run" in analysis


def _measured(outputs, run_id, study, notebook, params, metrics):
    from benchlib.core import envinfo

    results.write_record(outputs / "results", results.make_record(
        run_id=run_id, table=study, notebook=notebook, params=params, env=envinfo.collect(),
        started_at=results.now(), status="ok", metrics=metrics))


@pytest.mark.notebook
def test_scaling_projection_notebook_runs_without_records_and_from_measured_ones(outputs):
    assert main(["run", "45_scaling_projection", "--study", "projection"]) == 0
    [seed] = results.load_results(outputs / "results").to_dict("records")
    assert seed["status"] == "ok" and seed["stops_at_devices"] == 8 and seed["stops_by"] == "input"
    from benchlib.analysis import projection_check  # the record holds the check's own figure

    expected = projection_check.median_abs_error(projection_check.check_dlperf())
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
            "none", "-p", "devices_per_node", "2", "-p", "host_cores", "2"]
    assert main(args) == 0
    latest = results.load_results(outputs / "results", "projection", latest=True)
    [here] = latest[latest["compute"] == "newest"].to_dict("records")  # not the seed-only row
    assert here["compute_source"] == "run aaaaaaaaaaa1 (40_framework_comparison, resnet18, cpu)"
    assert here["stops_at_devices"] == 2 and here["stops_by"] == "shared cores"
    assert main([a if a != "none" else "newest" for a in args]) == 1  # no IO record to read
    df = results.load_results(outputs / "results", "projection")
    [failed] = df[df["status"] == "failed"].to_dict("records")
    assert failed["error"].startswith(
        "input_ceiling: no record that measures it under the results folder; run notebook 10")


STUDY_NOTEBOOKS = [p for p in NOTEBOOKS if p != TRIVIAL]


@pytest.mark.parametrize("path", STUDY_NOTEBOOKS, ids=lambda p: p.name)
def test_one_name_per_study_across_notebook_config_modules_and_sections(path):
    """notebooks/NN_<study>.ipynb, <Study>Config (with study = "<study>"),
    benchlib/studies/<study>.py (none for scaling_projection, which launches nothing),
    benchlib/analysis/<study>.py, its section in 90_analysis and its parameter files
    params/<study>_*.yaml all say the same name."""
    study = path.stem.split("_", 1)[1]
    spec = NotebookSpec.read(path)
    config = CONFIGS[spec.config]
    assert config.study == study
    assert config.__name__ == "".join(w.capitalize() for w in study.split("_")) + "Config"
    package = ROOT / "benchlib"
    if study not in ("analysis", "compare"):  # read records of every study; no runs of their own
        assert (package / "analysis" / f"{study}.py").is_file()
        sections = [c.source for c in nbformat.read(ROOT / "notebooks" / "90_analysis.ipynb", 4).cells
                    if c.cell_type == "markdown" and c.source.startswith(f"## {study}: ")]
        assert len(sections) == 1
        if study != "scaling_projection":  # computes from records and tables; runs nothing
            assert (package / "studies" / f"{study}.py").is_file()
    studies = {p.stem.split("_", 1)[1] for p in STUDY_NOTEBOOKS}
    for file in (ROOT / "params").glob("*.yaml"):
        if file.name != "smoke_cpu.yaml":  # one row of every study
            assert any(file.stem.startswith(f"{s}_") for s in studies), file.name
    assert registry.of_notebook(path.name) == study
    entry = registry.named(study)  # the registry lists it, under the same notebook and config
    assert entry.notebook == path.name and entry.config == spec.config
    module = package / "studies" / f"{study}.py"
    assert entry.preflight == (module.is_file() and "\ndef preflight(" in module.read_text())


def test_the_study_registry_lists_every_notebook_once_in_reading_order():
    assert [s.notebook for s in registry.STUDIES] == sorted(p.name for p in STUDY_NOTEBOOKS)
    with pytest.raises(ConfigError, match="study: 'io' is not a study; studies: data_prep, "
                       "single_device_io, dp_vs_ddp"):
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
