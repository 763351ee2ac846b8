import nbformat
import pytest
from conftest import ROOT, TRIVIAL, write_params

from benchlib.cli import main
from benchlib.errors import UsageError
from benchlib.runs.params import NotebookSpec, load_plan


def test_table_rows_get_defaults_and_the_notebooks_own_defaults(tmp_path):
    file = write_params(tmp_path, f"""
study: t
notebook: {TRIVIAL}
defaults: {{fail: false}}
table:
  - {{x: 1}}
  - {{x: 2}}
""")
    rows = load_plan(file)
    assert [r.params for r in rows] == [{"x": 1, "fail": False, "sleep_s": 0.0},
                                        {"x": 2, "fail": False, "sleep_s": 0.0}]
    assert rows[0].overrides == {"fail": False, "x": 1}
    assert rows[0].table == "t"  # `study:`, the older spelling of `name:`, names the table
    assert rows[0].run_id != rows[1].run_id
    assert rows[1].source == f"{file}: row 2"


def test_grid_is_the_cartesian_product_in_order(tmp_path):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\n"
                                  "grid: {x: [1, 2, 3], fail: [false, true]}\n")
    assert [(r.params["x"], r.params["fail"]) for r in load_plan(file)] == [
        (1, False), (1, True), (2, False), (2, True), (3, False), (3, True)]


def test_several_studies_in_one_file_and_notebook_by_short_name(tmp_path):
    file = write_params(tmp_path, f"""
studies:
  - {{name: a, notebook: {TRIVIAL}}}
  - {{name: prep, notebook: 00_data_prep, table: [{{size: 10, offline: true}}]}}
""")
    rows = load_plan(file)
    assert [(r.table, r.notebook.name) for r in rows] == [("a", "trivial.ipynb"),
                                                          ("prep", "00_data_prep.ipynb")]
    assert rows[1].params["size"] == 10 and rows[1].params["path"] == "outputs/data"


BAD = [
    ("name: t\nnotebook: {nb}\ntable: [{{x: 1}}\n",
     "not valid YAML at line 4"),
    ("name: t\nnotebook: {nb}\ntabel: [{{x: 1}}]\n",
     "unknown key 'tabel'; allowed: name, notebook, description, defaults, table, grid"),
    ("name: t\nnotebook: {nb}\ntable: [{{x: 1}}, {{y: 2}}]\n",
     "row 2: y: not a parameter of trivial.ipynb; allowed: x, fail, sleep_s"),
    ("name: t\nnotebook: {nb}\ntable: [{{x: '3'}}]\n",
     "row 1: x: expected int, got str '3'"),
    ("name: t\nnotebook: 00_data_prep\ntable: [{{dataset: mnist}}]\n",
     "row 1: dataset: 'mnist' is not one of all, fashion-mnist, mydataset"),
    ("name: t\nnotebook: 00_data_prep\ntable: [{{size: -5}}]\n",
     "row 1: size: must be >= 1, got -5"),
    ("name: t\nnotebook: nope\n",
     "notebook: 'nope' not found; known: 00_data_prep, 10_single_device_io, 15_memory_and_batch, 20_dp_vs_ddp, "
     "30_multinode_lightning, 35_fault_tolerance, 40_framework_comparison, 45_scaling_projection, "
     "50_transformer_training, 55_compile, 90_analysis"),
    ("name: t\nnotebook: {nb}\ntable: [{{x: 1}}]\ngrid: {{x: [1]}}\n",
     "give either table or grid, not both"),
    ("name: t\nnotebook: {nb}\ngrid: {{x: 3}}\n",
     "grid: must map each parameter to a non-empty list"),
    ("name: t\nnotebook: {nb}\ntable: [{{x: 1}}, {{x: 1}}]\n",
     "row 2: same table and parameters as"),
    ("notebook: {nb}\n", "name: required"),
    ("- just a list\n", "must be a mapping with name and notebook, or studies"),
    ("name: t\nstudy: t\nnotebook: {nb}\n", "give name, not both name and study"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_bad_tables_are_refused_with_file_row_and_parameter(tmp_path, text, message):
    file = write_params(tmp_path, text.format(nb=TRIVIAL))
    with pytest.raises(UsageError) as info:
        load_plan(file)
    assert str(info.value).startswith(str(file)) and message in str(info.value)
    assert "\n" not in str(info.value)


def test_cli_sweep_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, outputs, capsys):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable: [{{x: 1}}, {{x: -1, z: 0}}]\n")
    assert main(["sweep", str(file)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"benchlib sweep: {file}: row 2: z: not a parameter of trivial.ipynb; allowed: x, fail, sleep_s"
    assert not outputs.exists()  # row 1 was valid, but nothing ran


def test_cli_sweep_missing_file(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: no such parameter file" in capsys.readouterr().err


def test_dry_run_lists_rows_and_runs_nothing(tmp_path, outputs, capsys):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ngrid: {{x: [1, 2]}}\n")
    assert main(["sweep", str(file), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("run  t/") for line in lines)
    assert not outputs.exists()


def test_loading_a_plan_checks_values_only_and_preflight_asks_the_machine(tmp_path):
    """A Slurm sweep loads its plan on a login node: nothing there may ask for the data
    or a GPU; the row's preflight does, where the row runs."""
    from benchlib.runs.params import preflight

    file = write_params(tmp_path, f"name: t\nnotebook: 10_single_device_io\n"
                                  f"table: [{{path: {tmp_path / 'none'}, device: cpu}}]\n")
    rows = load_plan(file)  # the data is not there: not this step's business
    with pytest.raises(UsageError, match=r"row 1: path: .* has no fashion-mnist data"):
        preflight(rows)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine without CUDA")
def test_sweep_executor_slurm_does_not_probe_this_machine(tmp_path, outputs, capsys, monkeypatch):
    from benchlib.config import DataPrepConfig
    from benchlib.data import prepare

    data = tmp_path / "data"  # on the shared file system, as the array tasks will read it
    prepare.prepare(DataPrepConfig(path=str(data), dataset="fashion-mnist", fashion_size=100,
                                   offline=True))
    file = write_params(tmp_path, f"name: t\nnotebook: 10_single_device_io\n"
                                  f"table: [{{path: {data}, device: gpu}}]\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no sinfo here
    assert main(["sweep", str(file), "--executor", "slurm", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("run  t/")
    assert main(["sweep", str(file), "--dry-run"]) == 2  # locally the row would run here
    assert "row 1: device: gpu asked for, but torch" in capsys.readouterr().err
    # data missing from the shared file system: refused before submitting, dry run or not
    file.write_text(file.read_text().replace(str(data), str(tmp_path / "none")))
    assert main(["sweep", str(file), "--executor", "slurm", "--dry-run"]) == 2
    assert "(checked before submitting: the array tasks read the same path)" in \
        capsys.readouterr().err


def test_an_empty_table_is_refused_not_swept_as_0_ok(tmp_path, outputs, capsys):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable: []\n")
    assert main(["sweep", str(file)]) == 2
    assert capsys.readouterr().err == (
        f"benchlib sweep: {file}: table: empty, so nothing would run; give one mapping per row, "
        "or leave table out to run the defaults once\n")
    assert not outputs.exists()


@pytest.mark.parametrize("text, message", [
    ("name: t\nnotebook: {nb}\ntable: [{{x: 1}}]\ngrid: {{x: [1]}}\n",
     ": give either table or grid, not both"),
    ("studies:\n  - {{name: t, notebook: {nb}, table: 3}}\n",
     ": studies[1]: table: must be a list of mappings"),
])
def test_file_level_errors_have_no_empty_segment(tmp_path, text, message):
    file = write_params(tmp_path, text.format(nb=TRIVIAL))
    with pytest.raises(UsageError) as info:
        load_plan(file)
    assert str(info.value).startswith(f"{file}{message}")
    assert ": :" not in str(info.value)


def test_a_run_with_a_bad_parameter_has_no_empty_segment(outputs, capsys):
    assert main(["run", str(TRIVIAL), "-p", "z", "1"]) == 2
    assert capsys.readouterr().err == ("benchlib run: run: z: not a parameter of trivial.ipynb; "
                                       "allowed: x, fail, sleep_s\n")


@pytest.mark.parametrize("flags, message", [
    (["--partition", "gpu;id"], "partition: 'gpu;id' may only hold letters, digits and _.:,%@=/+-[]"),
    (["--time", "1:00;id"], "time: '1:00;id' may only hold letters, digits and _.:,%@=/+-[]"),
])
def test_a_slurm_dry_run_refuses_what_the_real_run_refuses(tmp_path, outputs, capsys, monkeypatch,
                                                           flags, message):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable: [{{x: 1}}]\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no sinfo here
    for dry_run in (["--dry-run"], []):
        assert main(["sweep", str(file), "--executor", "slurm", *flags, *dry_run]) == 2, dry_run
        captured = capsys.readouterr()
        assert captured.err == f"benchlib sweep: {message}\n" and captured.out == "", dry_run
        assert not (outputs / "slurm").exists() or not any((outputs / "slurm").iterdir())


def test_a_local_dry_run_refuses_slurm_flags_as_the_real_run_does(tmp_path, outputs, capsys):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable: [{{x: 1}}]\n")
    for dry_run in (["--dry-run"], []):
        assert main(["sweep", str(file), "--partition", "gpu", *dry_run]) == 2, dry_run
        assert capsys.readouterr().err == ("benchlib sweep: executor: --partition, --time, "
                                           "--requeue and --share-nodes need --executor slurm\n")
    assert not outputs.exists()


@pytest.mark.parametrize("cells, said", [
    ([("x = 1", [])], "mine.ipynb: no cell tagged 'parameters'"),
    ([("# nothing to set", ["parameters"]), ("x = 1", [])],
     "mine.ipynb: its cell tagged 'parameters' assigns no value"),
])
def test_a_notebook_without_parameters_is_refused_saying_which_is_missing(tmp_path, cells, said):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src, metadata={"tags": tags})
                                         for src, tags in cells])
    nbformat.write(nb, tmp_path / "mine.ipynb")
    with pytest.raises(UsageError) as e:
        NotebookSpec.read(tmp_path / "mine.ipynb")
    assert str(e.value) == said


def test_an_old_table_with_arch_still_reads_as_model_with_one_note(tmp_path, capsys):
    """Notebook 40's `arch` is `model` now: a table written before still loads, its rows
    run with `model`, and one line says so (once, however many rows use it)."""
    file = write_params(tmp_path, """
name: fw
notebook: 40_framework_comparison
defaults: {device: cpu, arch: resnet18, image_size: 64, compare_jax: false}
table:
  - {nproc_per_node: 1}
  - {nproc_per_node: 1, arch: "timm:resnet10t"}
""")
    rows = load_plan(file)
    assert [r.params["model"] for r in rows] == ["resnet18", "timm:resnet10t"]
    assert all("arch" not in r.params and "arch" not in r.overrides for r in rows)
    assert rows[0].overrides["model"] == "resnet18"
    err = capsys.readouterr().err.splitlines()
    assert err == [f"note: {file}: arch: now called model; read as model (write model instead)"]
    # the table's row as written is what a record keeps beside its params, Slurm's too
    defaults = {"device": "cpu", "arch": "resnet18", "image_size": 64, "compare_jax": False}
    assert [r.params_raw for r in rows] == [{**defaults, "nproc_per_node": 1},
                                            {**defaults, "nproc_per_node": 1,
                                             "arch": "timm:resnet10t"}]
    from benchlib.runs import slurm_sweep

    slurm_sweep.write_plan(rows, tmp_path / "plan.json")
    assert [r.params_raw for r in slurm_sweep.read_plan(tmp_path / "plan.json")] == \
        [r.params_raw for r in rows]


def test_an_old_name_beside_its_new_one_is_refused_naming_both(tmp_path):
    file = write_params(tmp_path, "name: fw\nnotebook: 40_framework_comparison\n"
                                  "table: [{arch: resnet18, model: resnet50}]\n")
    with pytest.raises(UsageError, match=r"row 1: arch: is the old name of model; give model "
                                         r"only"):
        load_plan(file)


def test_a_row_carries_the_config_it_built_to_the_preflight_and_the_kernel(tmp_path):
    """A row's config is built once, when its table is checked: the preflight takes it
    (the notebook is not read again: here it is gone by then), and the kernel gets its
    every field as the notebook's parameters."""
    import shutil

    from benchlib.config import DpVsDdpConfig
    from benchlib.runs import params, sweep

    notebook = tmp_path / "20_dp_vs_ddp.ipynb"
    shutil.copy(params.find_notebook("20_dp_vs_ddp", "test"), notebook)
    file = write_params(tmp_path, f"name: dp\nnotebook: {notebook}\n"
                                  "table: [{device: cpu, strategy: single, nproc_per_node: 1, "
                                  "dataset: synthetic, model: simplecnn, max_steps: 5}]\n")
    [row] = load_plan(file)
    assert row.config == DpVsDdpConfig.from_params(row.params) and row.config.max_steps == 5
    notebook.unlink()
    params.preflight([row])
    assert sweep.kernel_parameters(row) == row.config.as_dict() == row.params  # its record's
    [trivial] = load_plan(write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\n"
                                                 "table: [{x: 1}]\n", "t.yaml"))
    assert trivial.config is None and sweep.kernel_parameters(trivial) == {"x": 1}


def test_a_slurm_plan_carries_each_rows_config_and_the_submit_checks_read_it(tmp_path):
    """The plan the array tasks read holds the config each row built (class and values);
    the data check before submitting reads the configs: a data set of the user's own is
    theirs to have, a prepared one must be there."""
    from benchlib.config import FrameworkComparisonConfig
    from benchlib.runs import slurm_sweep

    file = write_params(tmp_path, f"""
name: fw
notebook: 40_framework_comparison
defaults: {{device: cpu, image_size: 32, path: {tmp_path / "nothing"}}}
table:
  - {{model: "examples.custom_model:build", dataset: "examples.custom_data:shapes"}}
  - {{model: resnet18, dataset: imagefolder}}
""")
    rows = load_plan(file)
    slurm_sweep.write_plan(rows, tmp_path / "plan.json")
    again = slurm_sweep.read_plan(tmp_path / "plan.json")
    assert [r.config for r in again] == [r.config for r in rows]
    assert all(isinstance(r.config, FrameworkComparisonConfig) for r in again)
    assert [(r.params, r.overrides, r.source) for r in again] == \
        [(r.params, r.overrides, r.source) for r in rows]
    slurm_sweep.check_data(again[:1])
    with pytest.raises(UsageError, match=rf"{file}: row 2: path: .* has no imagefolder data"):
        slurm_sweep.check_data(again)


def test_a_table_that_promises_an_interval_asks_for_the_launches_the_rule_needs():
    """An interval and a verdict come only from core.stats.MIN_LAUNCHES launches or more,
    each a fresh process: a parameter file whose comment promises an interval asks for
    that many launches of every row (repeat_mode process); one of fewer promises a range."""


    from benchlib.core.stats import MIN_LAUNCHES

    promising = []
    for file in sorted((ROOT / "params").glob("*.yaml")):
        comment = " ".join(ln for ln in file.read_text().splitlines() if ln.startswith("#"))
        if "interval" not in comment:
            continue
        promising.append(file.name)
        for row in load_plan(file):
            # a study without repeat_mode launches every repeat as a process (notebook 55)
            mode = getattr(row.config, "repeat_mode", "process")
            assert (mode, row.config.repeats >= MIN_LAUNCHES) == (
                "process", True), f"{row.source}: {row.config.repeats} {mode}"
    assert "transformer_training_cpu.yaml" in promising and "dp_vs_ddp_seed002.yaml" in promising


@pytest.mark.parametrize("table", sorted((ROOT / "params").glob("*.yaml")), ids=lambda p: p.name)
def test_a_table_read_from_the_configs_alone_gives_the_rows_read_from_the_notebooks(table):
    """`read_notebooks=False` (the GPU check, on an image without nbformat or papermill)
    builds every committed table's rows as the sweep does, config for config."""
    read = load_plan(table)
    assert [(r.row_id, r.config) for r in load_plan(table, read_notebooks=False)] \
        == [(r.row_id, r.config) for r in read]


def test_a_notebook_of_ones_own_needs_the_notebook_read(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})]
    path = tmp_path / "mine.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(UsageError, match="mine.ipynb: not a study of the registry, so its "
                                         "parameters are only in the notebook"):
        NotebookSpec.of_config(path)
