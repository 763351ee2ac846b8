import json
import os
from pathlib import Path

import nbformat
import pytest
from conftest import TRIVIAL, write_params

from benchlib.cli import main
from benchlib.records import results
from benchlib.runs.params import load_plan
from benchlib.runs.sweep import run_plan

pytestmark = pytest.mark.notebook


def trivial_study(tmp_path, xs, failing=()):
    rows = "\n".join(f"  - {{x: {x}, fail: {str(x in failing).lower()}}}" for x in xs)
    return write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable:\n{rows}\n")


def test_a_failing_row_is_recorded_and_the_next_row_still_runs(tmp_path, outputs):
    rows = load_plan(trivial_study(tmp_path, [1, 2, 3], failing={2}))
    summary = run_plan(rows, outputs, progress=False)
    assert (summary.ok, summary.failed, summary.skipped) == (2, 1, 0)

    recs = {r.params["x"]: results.find_record(outputs / "results", "t", r.run_id) for r in rows}
    assert recs[1]["status"] == "ok" and recs[1]["metrics"] == {"y": 2}
    assert recs[3]["status"] == "ok" and recs[3]["metrics"] == {"y": 6}
    failed = recs[2]
    assert failed["status"] == "failed" and failed["metrics"] == {}
    assert failed["error"]["type"] == "ValueError"
    assert failed["error"]["message"] == "asked to fail with x=2"
    assert failed["params"] == {"x": 2, "fail": True, "sleep_s": 0.0}
    assert failed["env"]["hostname"] and failed["method_version"]

    executed = nbformat.read(outputs / failed["executed_notebook"], 4)
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors and errors[0].evalue == "asked to fail with x=2"
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "x = 2" in injected[0].source
    # nothing temporary is left behind
    leftovers = [p for p in outputs.rglob(".*") if p.is_file()]
    assert leftovers == []


def test_rerun_skips_ok_rows_and_retries_failed_ones(tmp_path, outputs):
    file = trivial_study(tmp_path, [1, 2], failing={2})
    run_plan(load_plan(file), outputs, progress=False)
    first = sorted(p.stat().st_mtime_ns for p in (outputs / "results" / "t").glob("*.json"))

    summary = run_plan(load_plan(file), outputs, progress=False)
    assert (summary.ok, summary.failed, summary.skipped) == (0, 1, 1)
    ok_row = next(r for r in load_plan(file) if r.params["x"] == 1)
    ok_file = outputs / "results" / "t" / f"{ok_row.run_id}.json"
    assert ok_file.stat().st_mtime_ns in first  # the ok record was not rewritten

    summary = run_plan(load_plan(file), outputs, force=True, progress=False)
    assert (summary.ok, summary.failed, summary.skipped) == (1, 1, 0)


def test_cli_sweep_exit_status_and_summary(tmp_path, outputs, capsys):
    file = trivial_study(tmp_path, [4, 5, 6], failing={5, 6})
    assert main(["sweep", str(file), "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "1 ok, 2 failed, 0 skipped" in captured.out
    assert captured.err.count("FAILED ") == 2 and "asked to fail with x=5" in captured.err
    assert main(["sweep", str(file), "--no-progress"]) == 1
    assert "0 ok, 2 failed, 1 skipped" in capsys.readouterr().out


def test_cli_run_one_notebook_with_parameters(outputs, capsys):
    assert main(["run", str(TRIVIAL), "-p", "x", "21", "--table", "adhoc"]) == 0
    out = capsys.readouterr().out
    record_file = out.split("record: ")[1].strip()
    rec = json.loads(open(record_file).read())
    assert (rec["table"], rec["study"]) == ("adhoc", "trivial")  # its table, its notebook's study
    assert rec["metrics"] == {"y": 42} and rec["params"]["x"] == 21


def test_cli_run_rejects_an_undeclared_parameter(outputs, capsys):
    assert main(["run", str(TRIVIAL), "-p", "workers", "3"]) == 2
    assert "workers: not a parameter of trivial.ipynb; allowed: x, fail" in capsys.readouterr().err
    assert not outputs.exists()


def _sweep_process(file, outputs):
    import os
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "benchlib", "sweep", str(file), "--no-progress"],
                            env={**os.environ, "BENCHLIB_OUTPUTS": str(outputs)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _ok_records(outputs):
    recs = [json.loads(p.read_text()) for p in (outputs / "results" / "t").glob("*.json")]
    return sorted(r["params"]["x"] for r in recs if r["status"] == "ok")


def test_a_sweep_killed_mid_row_leaves_nothing_half_written_and_its_kernel_folder_to_the_rerun(
        tmp_path, outputs, tmpdir_short):
    """Killed while row 2 runs: no half record, row 1's notebook whole, and the kernel
    folder it left (issue 17, item 10) removed by the next sweep, which runs rows 2 and 3.
    (One killed sweep serves what test_kernels asked of a killed sweep too.)"""
    import signal
    import time

    from benchlib.runs import kernels

    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ndefaults: {{sleep_s: 3}}\n"
                                  "table: [{x: 1}, {x: 2}, {x: 3}]\n")
    sweep = _sweep_process(file, outputs)

    deadline = time.monotonic() + 120
    while _ok_records(outputs) != [1]:
        assert sweep.poll() is None and time.monotonic() < deadline, "row 1 never finished"
        time.sleep(0.2)
    # row 1's kernel folder is gone by its record; row 2's kernel is starting once its is there
    while not list(tmpdir_short.glob(f"{kernels.PREFIX}{sweep.pid}-*/kernel.json")):
        assert sweep.poll() is None and time.monotonic() < deadline, "no kernel folder appeared"
        time.sleep(0.2)
    time.sleep(1)  # row 2 sleeps 3 s in its notebook
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    assert _ok_records(outputs) == [1]
    for record in outputs.rglob("*.json"):  # whatever is there parses (no half record)
        json.loads(record.read_text())
    row1 = load_plan(file)[0].run_id  # only row 1's executed notebook, and it is whole
    assert [p.name for p in (outputs / "runs" / "t").glob("[!.]*.ipynb")] == [f"{row1}.ipynb"]
    nbformat.read(outputs / "runs" / "t" / f"{row1}.ipynb", 4)
    assert list(tmpdir_short.glob(f"{kernels.PREFIX}*"))  # what a killed sweep leaves

    rerun = _sweep_process(file, outputs)
    out, _ = rerun.communicate(timeout=120)
    assert rerun.returncode == 0 and "2 ok, 0 failed, 1 skipped" in out  # row 2 is free again
    assert _ok_records(outputs) == [1, 2, 3]
    assert [p for p in outputs.rglob(".*") if p.is_file()] == []
    assert not list(tmpdir_short.glob(f"{kernels.PREFIX}*"))  # the killed sweep's removed too


def test_two_sweeps_on_the_same_outputs_split_the_rows_and_lose_nothing(tmp_path, outputs):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ndefaults: {{sleep_s: 1}}\n"
                                  "table: [{x: 1}, {x: 2}, {x: 3}, {x: 4}]\n")
    first, second = _sweep_process(file, outputs), _sweep_process(file, outputs)
    outs = [p.communicate(timeout=180)[0] for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs
    assert _ok_records(outputs) == [1, 2, 3, 4]  # one ok record per row
    ran = [int(o.split(" ok,")[0].split()[-1]) for o in outs]
    assert sum(ran) == 4, outs  # no row ran twice



def test_a_notebook_written_without_a_kernelspec_runs_with_pythons_kernel(tmp_path, outputs):
    """nbformat's new_notebook() names no kernel and no language, and its untagged cells
    have no tags: papermill's own inspection stops at "No kernel name found in notebook";
    the sweep reads and runs it as it runs every notebook, with Python's kernel."""
    trivial = nbformat.read(TRIVIAL, 4)
    mine = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(trivial.cells[1].source, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(trivial.cells[2].source)])
    assert "kernelspec" not in mine.metadata and "tags" not in mine.cells[1].metadata
    nbformat.write(mine, tmp_path / "mine.ipynb")
    plan = write_params(tmp_path, f"name: mine\nnotebook: {tmp_path / 'mine.ipynb'}\n"
                                  "table:\n  - {x: 4}\n")
    [row] = load_plan(plan)
    assert row.params == {"x": 4, "fail": False, "sleep_s": 0.0}  # its declared defaults too
    summary = run_plan([row], outputs, progress=False)
    assert (summary.ok, summary.failed) == (1, 0)
    assert results.find_record(outputs / "results", "mine", row.run_id)["metrics"] == {"y": 8}


JAR_CONFIG = '''"""A study whose parameters were renamed: `beans` is now `count`, `lid: true` closed."""

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import StudyConfig


@dataclasses.dataclass
class JarConfig(StudyConfig):
    renamed: ClassVar[dict[str, str]] = {"beans": "count"}
    old_values: ClassVar[dict[str, dict[Any, Any]]] = {"lid": {True: "closed", False: "open"}}

    count: int = 3
    """Beans put in the jar."""
    lid: str = "open"
    """open or closed."""
'''


def jar_study(tmp_path, monkeypatch) -> Path:
    """A study of one's own (joined through BENCHLIB_STUDIES, as tests/toystudy is) whose
    config reads an old name and an old value; its notebook publishes what it received."""
    package = tmp_path / "jarstudy"
    package.mkdir()
    (package / "config.py").write_text(JAR_CONFIG)
    (package / "__init__.py").write_text(
        "from benchlib.config.studies import Study\n\nSTUDIES = (Study('jar', '70_jar.ipynb', "
        "'How full is the jar?', config='jarstudy.config:JarConfig', module='', analysis='', "
        "preflight=False),)\n")
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('count: int = 3\nlid: str = "open"',
                                  metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "from benchlib.records import results\nfrom jarstudy.config import JarConfig\n\n"
            "cfg = JarConfig.from_params(globals())\n"
            "results.publish({'fill': cfg.count * (2 if cfg.lid == 'closed' else 1)})")]),
        package / "70_jar.ipynb")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("BENCHLIB_STUDIES", "jarstudy")
    return write_params(tmp_path, f"name: jar\nnotebook: {package / '70_jar.ipynb'}\n"
                                  "table:\n  - {beans: 4, lid: true}\n")


def test_a_rows_record_holds_what_its_kernel_received_and_the_tables_row_beside_it(
        tmp_path, outputs, monkeypatch):
    """A row written with an old name and an old value: its kernel receives them as they
    are now, and its record's params are those (the row's identity: a rerun skips it),
    with the table's row as written beside them in params_raw."""
    file = jar_study(tmp_path, monkeypatch)
    [row] = load_plan(file)
    summary = run_plan([row], outputs, progress=False)
    assert (summary.ok, summary.failed) == (1, 0)
    rec = results.find_record(outputs / "results", "jar", row.run_id)
    assert rec["params"] == {"count": 4, "lid": "closed"}
    assert rec["params_raw"] == {"beans": 4, "lid": True}
    assert rec["metrics"] == {"fill": 8}  # the kernel's config was built from the new ones
    executed = nbformat.read(outputs / rec["executed_notebook"], 4)
    [injected] = [c.source for c in executed.cells
                  if "injected-parameters" in c.metadata.get("tags", [])]
    assert "count = 4" in injected and 'lid = "closed"' in injected and "beans" not in injected
    assert results.latest_ok(results.read_records(outputs / "results")) == [rec]

    summary = run_plan(load_plan(file), outputs, progress=False)
    assert (summary.ok, summary.failed, summary.skipped) == (0, 0, 1)
    # the same row written as it is now: the same row, and nothing raw to keep
    now = write_params(tmp_path, f"name: jar\nnotebook: {row.notebook}\n"
                                 "table:\n  - {count: 4, lid: closed}\n", "now.yaml")
    [same] = load_plan(now)
    assert (same.run_id, same.params_raw) == (row.run_id, None)
    assert run_plan([same], outputs, progress=False).skipped == 1
