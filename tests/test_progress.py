"""Progress bars: shown in a notebook without flooding it, hidden under a sweep and on a
terminal that is not a tty."""

from __future__ import annotations

import time

import nbformat
from nbclient import NotebookClient

from benchlib.core import progress


def test_a_kernel_started_by_a_sweep_shows_no_bar(monkeypatch, capsys):
    monkeypatch.setenv("BENCHLIB_RUN_ID", "abc123")
    assert progress.where() == "sweep"
    bar = progress.bar(10, "epochs", enabled=True)
    bar.update(10)
    bar.close()
    with progress.waiting("ranks"):
        pass
    assert bar.disable and capsys.readouterr().err == ""


def test_a_terminal_shows_a_bar_on_a_tty_or_when_asked(monkeypatch, capsys):
    for name in progress.SWEEP_VARS:
        monkeypatch.delenv(name, raising=False)
    assert progress.where() == "terminal"
    assert progress.bar(3).disable  # captured stderr is no tty
    asked = progress.bar(3, "sweep", unit="row", enabled=True, initial=1)
    asked.update(2)
    asked.close()
    assert "sweep: 100%" in capsys.readouterr().err and asked.n == 3


def test_waiting_redraws_the_elapsed_time_with_rank_0s_last_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(progress, "where", lambda: "notebook")
    monkeypatch.setattr(progress, "_widget_class", lambda: None)  # the plain fallback
    log = tmp_path / "rank0.log"
    log.write_text("joined\nstep 3: loss 0.5012\n")
    with progress.waiting("ddp: 2 rank(s) via torchrun", log, every_s=0.05):
        time.sleep(0.4)
    err = capsys.readouterr().err
    assert "ddp: 2 rank(s) via torchrun" in err and "step 3: loss 0.5012" in err


def test_in_a_notebook_a_thousand_updates_leave_a_few_redraws_of_one_line(tmp_path, monkeypatch):
    """A real kernel, as JupyterLab starts it (no sweep variables): the bar redraws in
    place at most once a second, so a fast loop cannot flood the output."""
    for name in progress.SWEEP_VARS:
        monkeypatch.delenv(name, raising=False)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from benchlib.core import progress\n"
        "print(progress.where())\n"
        "bar = progress.bar(1000, 'steps', unit='step')\n"
        "for _ in range(1000):\n"
        "    bar.update()\n"
        "bar.close()")])
    NotebookClient(nb, kernel_name="python3", timeout=120,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    streams = nb.cells[0].outputs
    out = "".join(o.text for o in streams if o.name == "stdout")
    err = "".join(o.text for o in streams if o.name == "stderr")
    assert out == "notebook\n"
    redraws = [r for r in err.replace("\n", "\r").split("\r") if r.strip()]
    assert redraws[-1].startswith("steps: 100%|") and "1000/1000" in redraws[-1]
    assert len(redraws) <= 4, redraws
