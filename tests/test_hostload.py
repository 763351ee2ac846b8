"""The host's load around each run is in its record, and a run started on a busy host is
flagged in the record and the report's run table (issue 17, item 10)."""

import os

import pytest
from conftest import TRIVIAL, write_params

from benchlib.core import hostload
from benchlib.records import results
from benchlib.report import publish
from benchlib.runs import sweep
from benchlib.runs.params import load_plan


def test_busy_means_the_1_minute_load_above_the_cores_at_start():
    assert hostload.busy({"load_1m": 2.5, "cpus": 2})
    assert not hostload.busy({"load_1m": 2.0, "cpus": 2})
    assert not hostload.busy({"load_1m": None, "cpus": 2})  # no load average on this OS
    # other tasks on every core: busy whatever the (minute-old) average says
    assert hostload.busy({"load_1m": 0.3, "running": 2, "cpus": 2})
    assert not hostload.busy({"load_1m": 0.3, "running": 1, "cpus": 2})
    spun = {"load_1m": 0.3, "load_5m": 0.2, "load_15m": 0.1, "running": 2, "cpus": 2}
    assert hostload.describe(hostload.span(spun, spun)) == \
        "busy host: load 0.3 on 2 cores, 2 other tasks running at start"
    start = {"load_1m": 9.0, "load_5m": 4.0, "load_15m": 1.0, "cpus": 2}
    assert hostload.describe(hostload.span(start, start)) == \
        "busy host: load 9 on 2 cores at start"
    assert hostload.describe(None) == ""


@pytest.mark.notebook
def test_a_row_records_the_load_at_start_and_end_and_a_busy_start(tmp_path, outputs,
                                                                    monkeypatch):
    loads = iter([(9.0, 5.0, 3.0), (1.0, 4.0, 3.0)])  # busy at start, quiet at the end
    monkeypatch.setattr(os, "getloadavg", lambda: next(loads))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    [row] = load_plan(write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\n"))
    record = sweep.run_row(row, outputs)
    assert record["status"] == "ok"
    running = [record["host_load"][when].pop("running") for when in ("start", "end")]
    assert all(isinstance(n, int) and n >= 0 for n in running)  # this host's, as it was
    assert record["host_load"] == {
        "start": {"load_1m": 9.0, "load_5m": 5.0, "load_15m": 3.0, "cpus": 2},
        "end": {"load_1m": 1.0, "load_5m": 4.0, "load_15m": 3.0, "cpus": 2}, "busy": True}


def _record(run_id: str, load_1m: float) -> dict:
    sample = {"load_1m": load_1m, "load_5m": 1.0, "load_15m": 1.0, "cpus": 2}
    return results.make_record(
        run_id=run_id, table="s", notebook="trivial.ipynb", params={"x": run_id},
        env={"hostname": "h1", "cpu_model": "cpu", "gpus": [], "packages": {}},
        started_at="2026-01-01T00:00:00.000+00:00", status="ok", metrics={"y": 1.0},
        host_load=hostload.span(sample, sample))


def test_the_report_flags_a_run_started_on_a_busy_host(outputs):
    results.write_record(outputs / "results", _record("quiet1", 0.5))
    results.write_record(outputs / "results", _record("busy01", 3.5))
    page = publish.build(outputs, analysis=False).read_text()
    rows = [r for r in page.split("<tr>") if "quiet1" in r or "busy01" in r]
    flag = "busy host: load 3.5 on 2 cores at start"
    assert [flag in r for r in rows if "busy01" in r] == [True]
    assert [flag in r or "busy host" in r for r in rows if "quiet1" in r] == [False]
