"""The host's load around each run is in its record, and a run started on a busy host is
flagged in the record and the report's run table (issue 17, item 10)."""

import os
import subprocess
import sys
from pathlib import Path

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
    monkeypatch.setattr(hostload, "job_cores", lambda: 2)
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


SPIN = "import time\nprint('up', flush=True)\nend = time.time() + 20\nwhile time.time() < end: pass\n"


def _spinner(**how):
    """A busy loop, returned once it runs its own code (its exec finished: its environment
    is the one it was given)."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True,
                            stdout=subprocess.PIPE, **how)
    assert proc.stdout.readline() == b"up\n"
    return proc


def test_a_runs_contention_counts_other_tasks_on_its_cores_and_leaves_its_own_out(monkeypatch):
    """Two busy loops on this host's cores during the window, one started by this run's
    launch (it carries the launch's mark, as its ranks and workers do) and one not: the
    first is the run's own and never counted, the second is other work and is; a window
    that is not open samples nothing."""
    import time

    monkeypatch.setenv(hostload.LAUNCH_VAR, "/tmp/this-launch")
    other = _spinner(env={k: v for k, v in os.environ.items() if k != hostload.LAUNCH_VAR})
    own = _spinner()
    try:
        shared = hostload.Contention(lambda: True)
        assert shared._is_own(own.pid) and not shared._is_own(other.pid)
        seen = set()
        for _ in range(20):  # a spinner is runnable nearly always; a few scans catch it
            seen |= {pid for pid, state in hostload._task_states(shared.cores) if state == "R"}
            if other.pid in seen and own.pid in seen:
                break
            time.sleep(0.05)
        assert other.pid in seen and own.pid in seen
        counted = max(shared.sample() for _ in range(5))
        assert counted >= 1
        closed = hostload.Contention(lambda: False)
        closed.start()
        time.sleep(0.7)
        assert closed.stop()["host_contention_samples"] == 0
        opened = hostload.Contention(lambda: True)
        opened.start()
        time.sleep(2.0)
        figures = opened.stop()
        assert figures["host_contention_samples"] >= 2 and figures["host_others_running"] >= 0.5
        assert figures["host_cores"] == hostload.job_cores()
    finally:
        for p in (own, other):
            p.kill()
            p.wait()


def test_a_process_without_an_environment_yet_is_its_parents(monkeypatch):
    """A rank caught between its fork and the end of its exec shows an empty environment
    (the CI failure of stop 56: the launch's mark unread, the rank counted as other work
    and remembered so). Such a process is judged by its parent, and asked again later; an
    empty one whose parent is not the run's is not the run's."""
    monkeypatch.setenv(hostload.LAUNCH_VAR, "/tmp/this-launch")
    bare = _spinner(env={})  # an empty environment, as mid-exec; its parent is this run
    other = subprocess.Popen(  # not the run's, and its own child bare as well
        [sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable,"
         f" '-c', {SPIN!r}], env={{}}, stdout=subprocess.PIPE); print(p.pid, flush=True);"
         " print(p.stdout.readline().decode(), end='', flush=True); p.wait()"],
        env={k: v for k, v in os.environ.items() if k != hostload.LAUNCH_VAR},
        stdout=subprocess.PIPE, start_new_session=True)
    try:
        orphan = int(other.stdout.readline())
        assert other.stdout.readline() == b"up\n"
        shared = hostload.Contention(lambda: True)
        assert Path(f"/proc/{bare.pid}/environ").read_bytes() == b""
        assert shared._is_own(bare.pid) and bare.pid not in shared.own
        assert not shared._is_own(orphan) and orphan not in shared.own
        assert not shared._is_own(other.pid) and other.pid in shared.own
    finally:
        for p in (bare, other):
            p.kill()
            p.wait()
        try:
            os.kill(orphan, 9)
        except (OSError, NameError):
            pass


def test_contention_is_judged_per_core_the_job_may_use():
    assert hostload.state(1.0, 2) == "contended" and hostload.state(0.6, 2) == "borderline"
    assert hostload.state(0.4, 2) == "alone" and hostload.state(1.0, 64) == "alone"
    assert hostload.state(None, 2) is None
    assert 1 <= hostload.job_cores() <= (os.cpu_count() or 1)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
                    reason="needs CPU affinity and 2 or more cores to confine a job to 1")
def test_a_job_confined_to_one_core_is_judged_and_threaded_on_that_core():
    """A Slurm cpuset (here: taskset to one core of the host's): ranks fit and threads per
    rank are counted on the cores the job may use, not os.cpu_count()."""
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
            "from benchlib.launch.argv import thread_env\n"
            "from benchlib.studies import checks\n"
            "env = thread_env(1, {})\n"
            "print(env['OMP_NUM_THREADS'], checks.visible_devices(False))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"], out
