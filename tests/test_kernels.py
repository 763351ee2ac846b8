"""The kernels a sweep starts leave nothing behind and put no noise in its output
(issue 17, item 10). What a killed sweep's kernel leaves, and the next sweep removes, is
checked on test_sweep's killed sweep (one kill serves both)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import write_params

from benchlib.runs import kernels, sweep, warm_kernels

pytestmark = pytest.mark.notebook


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_row_gets_no_sigint_leaves_no_kernel_files_and_a_killed_sweeps_are_removed(
        tmp_path, tmpdir_short):
    """One row serves both: its kernel, stopped after its notebook ran, gets no SIGINT, and
    it leaves no kernel files (a killed sweep's folder goes, a running sweep's stays)."""
    # jupyter_client's SIGINT before shutdown is what the kernel logs as
    # "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel"; a handler left in the
    # kernel's place for it makes the signal visible whatever the timing
    flag = tmp_path / "sigint"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("x = 0", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(
                    "from pathlib import Path\nget_ipython().kernel.saved_sigint_handler = "
                    f"lambda *a: Path({str(flag)!r}).write_text('SIGINT')")]
    nbformat.write(nb, tmp_path / "nb.ipynb")
    stale = tmpdir_short / f"{kernels.PREFIX}{_dead_pid()}-abc"
    stale.mkdir()
    (stale / "kernel.json").write_text("{}")
    running = tmpdir_short / f"{kernels.PREFIX}{os.getpid()}-def"  # a sweep still running
    running.mkdir()
    assert sweep.execute(tmp_path / "nb.ipynb", tmp_path / "out.ipynb", {"x": 1}, {}) is None
    assert not flag.exists()
    assert sorted(tmpdir_short.iterdir()) == [running]


def _probe_notebook(path: Path) -> Path:
    """A notebook that says where its kernel came from, and draws a figure."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("x = 0", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import os, sys\n"
            "print('ppid', os.getppid(), 'cwd', os.getcwd(), 'run', os.environ['BENCHLIB_RUN_ID'],"
            " 'torch', 'torch' in sys.modules)"),
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nplt.plot([0, 1], [x, x])\nplt.show()"),
        nbformat.v4.new_code_cell(
            "from benchlib.records import results\nresults.publish({'y': x})")]
    nbformat.write(nb, path)
    return path


def _kernel_origins(outputs: Path) -> list[tuple[int, str, str, bool, int]]:
    """(parent pid, cwd, run id, torch imported before the first cell, images) per row."""
    rows = []
    for path in sorted((outputs / "runs").glob("*/*.ipynb")):
        cells = {c.source.split()[1]: c for c in nbformat.read(path, as_version=4).cells
                 if c.cell_type == "code" and c.source.startswith("import ")}
        _, ppid, _, cwd, _, run, _, torch = cells["os,"].outputs[0]["text"].split()
        images = sum("image/png" in o.get("data", {}) for o in cells["matplotlib.pyplot"].outputs)
        rows.append((int(ppid), cwd, run, torch == "True", images))
    return rows


@pytest.mark.parametrize("warm", [True, False])
def test_a_sweeps_kernels_fork_from_one_warm_server_unless_told_not_to(tmp_path, tmpdir_short,
                                                                       warm):
    # what a row's kernel must get either way: its own run id, the notebook's folder as its
    # working directory, inline figures; warm, torch is there before the first cell and
    # every row's kernel has the same parent (the server), which is gone after the sweep
    notebook = _probe_notebook(tmp_path / "probe.ipynb")
    file = write_params(tmp_path, f"name: t\nnotebook: {notebook}\ntable: [{{x: 1}}, {{x: 2}}]\n")
    env = {**os.environ, "BENCHLIB_OUTPUTS": str(tmp_path / "out"),
           warm_kernels.ENV_VAR: "all" if warm else "0"}  # all: this notebook is no study
    sweep_run = subprocess.Popen([sys.executable, "-m", "benchlib", "sweep", str(file),
                                  "--no-progress"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    out, err = sweep_run.communicate(timeout=180)
    assert sweep_run.returncode == 0, err
    rows = _kernel_origins(tmp_path / "out")
    assert len(rows) == 2
    assert {cwd for _, cwd, _, _, _ in rows} == {str(tmp_path)}
    assert len({run for _, _, run, _, _ in rows}) == 2
    assert [images for *_, images in rows] == [1, 1]
    parents = {ppid for ppid, *_ in rows}
    if warm:
        assert len(parents) == 1 and parents != {sweep_run.pid}
        assert all(torch for _, _, _, torch, _ in rows)
        server = parents.pop()
        with pytest.raises(ProcessLookupError):
            os.kill(server, 0)
    else:
        assert parents == {sweep_run.pid}
        assert not any(torch for _, _, _, torch, _ in rows)
    assert "connect another client" not in out + err


def test_a_forked_kernel_is_polled_signalled_and_waited_for_through_its_pidfd():
    child = subprocess.Popen(["sleep", "30"])
    kernel = warm_kernels.ForkedKernel(child.pid)
    assert kernel.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        kernel.wait(timeout=0.05)
    kernel.kill()
    child.wait(timeout=10)  # reaped by its parent, as the server reaps its kernels
    assert kernel.wait(timeout=10) == 0 and kernel.poll() == 0
    kernel.send_signal(signal.SIGTERM)  # gone: nothing to signal, and no error


def test_only_this_interpreters_ipykernel_is_forked():
    assert warm_kernels.is_ipykernel([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not warm_kernels.is_ipykernel(["/usr/bin/python3.9", "-m", "ipykernel_launcher"])
    assert not warm_kernels.is_ipykernel([sys.executable, "-m", "xeus_python"])


def test_a_dead_server_leaves_the_next_kernels_to_start_fresh(capsys):
    with warm_kernels.serving() as server:
        server.process.kill()
        server.process.wait()
        cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "kernel.json"]
        assert warm_kernels.launch(cmd, dict(os.environ), None) is None
        assert warm_kernels.launch(cmd, dict(os.environ), None) is None  # no second try
    assert capsys.readouterr().err.count("the sweep's next kernels start fresh") == 1
