"""JupyterLab as a person uses it: `scripts/lab.sh` (what `make lab` runs) serves copies of
notebooks 10 and 90, headless chromium opens each, runs all cells from the Run menu, and
the test checks the kernel, the outputs and the plots, with screenshots under
outputs/screenshots/.

Chromium is Debian's: installed with apt-get when missing and this runs as root (CI),
else the tests are skipped with the command to run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from browser import (
    NOTEBOOK,
    ROOT,
    LabServer,
    error_outputs,
    find_or_install_chromium,
    open_notebook,
    rendered_images,
    run_all_cells,
    screenshot,
    stop_tree,
)
from conftest import TRIVIAL

pytestmark = pytest.mark.notebook  # JupyterLab runs notebooks in a real browser

VENV = Path(sys.prefix)
SCREENSHOTS = ROOT / "outputs" / "screenshots"
KERNEL = "benchlib (.venv)"  # the display name scripts/lab.sh registers
IO_NOTEBOOK = "10_single_device_io.ipynb"
ANALYSIS_NOTEBOOK = "90_analysis.ipynb"
BROKEN_NOTEBOOK = "broken.ipynb"  # benchlib's trivial notebook with fail=True
# notebook 10's parameters for a run of seconds on CPU (600 generated FashionMNIST images)
IO_PARAMS = {"device": '"cpu"', "repeats": "2", "warmup_steps": "1"}
# the records notebook 90 reads: one real row of notebook 10, run by a sweep
SWEEP = """
name: io_workers
notebook: {notebook}
defaults: {{device: cpu, dataset: fashion-mnist, epochs: 1, repeats: 2, warmup_steps: 1}}
grid: {{num_workers: [0]}}
"""


def _with_params(notebook: Path, values: dict[str, str]) -> nbformat.NotebookNode:
    """`notebook` with new values in its parameters cell (each line's type and comment kept)."""
    nb = nbformat.read(notebook, 4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    for name, value in values.items():
        cell.source, found = re.subn(rf"^({name}: \w+ = )\S+", rf"\g<1>{value}", cell.source,
                                     flags=re.M)
        assert found == 1, f"{notebook.name} has no parameter {name}"
    return nb


@pytest.fixture(scope="module")
def chromium() -> str:
    path, why = find_or_install_chromium()
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture(scope="module")
def headless_chromium(chromium):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: pip install -e '.[dev]'", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(headless_chromium):
    context = headless_chromium.new_context(viewport={"width": 1440, "height": 900})
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def lab_outputs(tmp_path_factory, small_data):
    """An outputs folder with generated FashionMNIST under data/ (the session's data sets,
    600 FashionMNIST images among them, which notebook 10 only reads: no `benchlib data`
    of its own), and a sweep of one row of notebook 10 writing its record under results/
    (started here, waited for by the test of notebook 90, so it runs while notebook 10
    runs in the browser)."""
    outputs = tmp_path_factory.mktemp("lab") / "outputs"
    outputs.mkdir()
    env = {**os.environ, "BENCHLIB_OUTPUTS": str(outputs)}
    (outputs / "data").symlink_to(small_data, target_is_directory=True)
    plan = outputs / "io.yaml"
    plan.write_text(SWEEP.format(notebook=ROOT / "notebooks" / IO_NOTEBOOK))
    log = outputs / "sweep.log"
    with open(log, "wb") as out:
        sweep = subprocess.Popen([sys.executable, "-m", "benchlib", "sweep", str(plan),
                                  "--no-progress"], stdout=out, stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True)
    yield outputs, sweep, log
    if sweep.poll() is None:
        stop_tree(sweep, grace_s=5)


@pytest.fixture(scope="module")
def lab(lab_outputs):
    """JupyterLab from scripts/lab.sh on copies of notebooks 10 (small parameters) and 90,
    and a notebook that fails; their `outputs/...` paths resolve into lab_outputs. Stopped
    at the end, also on failure."""
    outputs, _, _ = lab_outputs
    folder = outputs.parent / "notebooks"
    folder.mkdir()
    nbformat.write(_with_params(ROOT / "notebooks" / IO_NOTEBOOK, IO_PARAMS), folder / IO_NOTEBOOK)
    shutil.copy(ROOT / "notebooks" / ANALYSIS_NOTEBOOK, folder / ANALYSIS_NOTEBOOK)
    nbformat.write(_with_params(TRIVIAL, {"fail": "True"}), folder / BROKEN_NOTEBOOK)
    home = outputs.parent / "jupyter"
    home.mkdir()
    server = LabServer(folder, home, {"BENCHLIB_OUTPUTS": str(outputs)}, VENV)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
    assert server.process.returncode is not None


def _kernel_of(server: LabServer, name: str) -> dict:
    sessions = json.loads(server.api("/api/sessions"))
    return next(s["kernel"] for s in sessions if s["path"].endswith(name))


def _check_run(page, server: LabServer, name: str, shot: Path) -> None:
    """Run all cells of the open notebook; no error shown, a plot drawn, on `benchlib`."""
    try:
        run_all_cells(page)
    except Exception:
        screenshot(page, page.locator(".jp-NotebookPanel").first, shot)
        raise
    errors = error_outputs(page)
    images = rendered_images(page)
    screenshot(page, images[0] if images else page.locator(".jp-NotebookPanel").first, shot)
    assert not errors, f"{name} shows errors (screenshot {shot}):\n" + "\n".join(errors)
    assert images, f"{name} drew no plot (screenshot {shot})"
    kernel = _kernel_of(server, name)
    assert kernel["name"] == "benchlib"
    server.api(f"/api/kernels/{kernel['id']}", method="DELETE")  # free its memory


def test_lab_offers_only_the_benchlib_kernel_with_the_venvs_python(lab):
    specs = json.loads(lab.api("/api/kernelspecs"))
    assert specs["default"] == "benchlib" and list(specs["kernelspecs"]) == ["benchlib"]
    spec = specs["kernelspecs"]["benchlib"]["spec"]
    assert spec["display_name"] == KERNEL
    assert spec["argv"][0] == str(VENV / "bin" / "python")
    assert (VENV / "share" / "jupyter" / "kernels" / "benchlib" / "kernel.json").exists()


def test_notebook_10_runs_all_cells_in_jupyterlab_and_draws_its_plot(lab, page):
    open_notebook(page, lab, IO_NOTEBOOK, KERNEL)
    _check_run(page, lab, IO_NOTEBOOK, SCREENSHOTS / "lab_10_single_device_io.png")
    # the measurement showed its progress as one bar, redrawn in place (benchlib.progress)
    bars = page.locator(f"{NOTEBOOK} .jp-OutputArea-output").filter(
        has_text="fashion-mnist raw train: ").all_inner_texts()
    assert len(bars) == 1 and "100%|" in bars[0] and "2/2" in bars[0], bars
    assert len(bars[0].strip().splitlines()) == 1, bars


def test_analysis_notebook_runs_in_jupyterlab_over_a_small_results_folder(lab, lab_outputs, page):
    outputs, sweep, log = lab_outputs
    assert sweep.wait(timeout=300) == 0, f"the sweep failed; log: {log}\n{log.read_text()[-3000:]}"
    assert list((outputs / "results" / "io_workers").glob("*.json"))
    open_notebook(page, lab, ANALYSIS_NOTEBOOK, KERNEL)
    _check_run(page, lab, ANALYSIS_NOTEBOOK, SCREENSHOTS / "lab_90_analysis.png")


def test_a_cell_that_raises_is_seen_as_an_error_output(lab, page):
    """The checks above are not vacuous: a traceback in the page is found, and waiting for
    the run ends when a cell fails (the cells after it never get a count)."""
    open_notebook(page, lab, BROKEN_NOTEBOOK, KERNEL)
    run_all_cells(page)
    errors = error_outputs(page)
    assert len(errors) == 1 and "ValueError: asked to fail with x=0" in errors[0]
    assert not rendered_images(page)
    lab.api(f"/api/kernels/{_kernel_of(lab, BROKEN_NOTEBOOK)['id']}", method="DELETE")
