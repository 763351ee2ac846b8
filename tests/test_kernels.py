"""The kernels a sweep starts leave nothing behind and put no noise in its output
(issue 17, item 10)."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from conftest import TRIVIAL, write_params

from benchlib.runs import kernels, sweep

pytestmark = pytest.mark.notebook


@pytest.fixture
def tmpdir_short(monkeypatch):
    """A TMPDIR of its own, short enough for Unix socket paths (108 bytes)."""
    where = Path(tempfile.mkdtemp(prefix="bk", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(where))
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_kernel_stopped_after_its_notebook_ran_gets_no_sigint(tmp_path, tmpdir_short):
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
    assert sweep.execute(tmp_path / "nb.ipynb", tmp_path / "out.ipynb", {}, {}) is None
    assert not flag.exists()


def test_a_row_leaves_no_kernel_files_and_a_killed_sweeps_are_removed(tmp_path, tmpdir_short):
    stale = tmpdir_short / f"{kernels.PREFIX}{_dead_pid()}-abc"
    stale.mkdir()
    (stale / "kernel.json").write_text("{}")
    running = tmpdir_short / f"{kernels.PREFIX}{os.getpid()}-def"  # a sweep still running
    running.mkdir()
    assert sweep.execute(TRIVIAL, tmp_path / "out.ipynb", {"x": 1}, {}) is None
    assert sorted(tmpdir_short.iterdir()) == [running]


def test_a_sweep_killed_mid_row_leaves_its_kernel_folder_to_the_next_sweep(tmp_path, tmpdir_short):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable: [{{x: 1, sleep_s: 30}}]\n")
    env = {**os.environ, "BENCHLIB_OUTPUTS": str(tmp_path / "out")}
    killed = subprocess.Popen([sys.executable, "-m", "benchlib", "sweep", str(file),
                               "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmpdir_short.glob(f"{kernels.PREFIX}{killed.pid}-*/kernel.json")):
        assert time.monotonic() < deadline, "no kernel folder appeared"
        time.sleep(0.2)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert list(tmpdir_short.glob(f"{kernels.PREFIX}*"))  # what a killed sweep leaves
    file.write_text(f"name: t\nnotebook: {TRIVIAL}\ntable: [{{x: 2}}]\n")
    done = subprocess.run([sys.executable, "-m", "benchlib", "sweep", str(file), "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(tmpdir_short.glob(f"{kernels.PREFIX}*"))
