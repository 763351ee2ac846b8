"""`benchlib export --to mlflow` against a real tracking server: `mlflow server` on
loopback with a SQLite backend and served artifacts, started once for this module and
stopped with every process it started; what the export wrote is read back with MLflow's
own client. (Bad input, the unreachable server among it: tests/test_export.py.)"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from benchlib.cli import main
from benchlib.core.stats import summarize
from tests.export_sets import COMMIT, LAUNCHES, smoke_set

# found, not imported: importing mlflow costs ~3 CPU s, which collecting the suite (on every
# xdist worker) should not pay
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                                reason="the export extra (mlflow) is not installed")

# no job runner (7 more processes and ~6 CPU s at start) and no telemetry, here and in the server
QUIET = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true",
         "DO_NOT_TRACK": "true"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(server: subprocess.Popen) -> None:
    """SIGTERM to `mlflow server` (it stops its uvicorn worker and waits for it), then
    SIGKILL to whatever of its process group is left."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory):
    """An `mlflow server` on 127.0.0.1 (SQLite, artifacts served from a folder), in a process
    group of its own, for this module's tests; its URI once `/health` answers."""
    where = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    mlflow = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    log = open(where / "server.log", "w")
    server = subprocess.Popen(
        [mlflow, "server", "--backend-store-uri", f"sqlite:///{where / 'mlflow.db'}",
         "--artifacts-destination", str(where / "artifacts"), "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, **QUIET})
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240  # ~40 s on the 2 shared cores, under load
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mlflow server did not start: "
                                       f"{(where / 'server.log').read_text()[-2000:]}")
                time.sleep(0.5)
        with pytest.MonkeyPatch.context() as env:
            for k, v in QUIET.items():
                env.setenv(k, v)
            yield uri
    finally:
        _stop(server)
        log.close()


def client_of(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def runs_of(client, label: str) -> dict[str, object]:
    """benchlib.run_id -> the run, of every active run of result set `label`."""
    exp = client.get_experiment_by_name("benchlib/framework")
    runs = client.search_runs([exp.experiment_id], f"tags.`benchlib.label` = '{label}'")
    return {r.data.tags["benchlib.run_id"]: r for r in runs}


def test_mlflow_runs_keep_interval_spread_n_testbed_and_artifacts(tracking_uri, outputs, capsys):
    five, three = smoke_set(outputs)
    assert main(["export", "smoke", "--to", "mlflow", "--tracking-uri", tracking_uri]) == 0
    assert "mlflow: 2 runs created, 0 already there" in capsys.readouterr().out
    client = client_of(tracking_uri)
    runs = runs_of(client, "smoke")
    assert sorted(runs) == sorted([five["run_id"], three["run_id"]])

    run = runs[five["run_id"]]
    ci = summarize(LAUNCHES, "samples_per_s")
    assert run.info.status == "FINISHED"
    assert run.data.metrics == pytest.approx({
        "samples_per_s": 402.0, "samples_per_s_ci95_low": ci["samples_per_s_ci95_low"],
        "samples_per_s_ci95_high": ci["samples_per_s_ci95_high"], "samples_per_s_n": 6,
        "mfu": 0.31, "launches": 6})
    assert run.data.params == {"nproc_per_node": "1", "model": "resnet18", "path": "/data"}
    tags = run.data.tags
    assert tags["mlflow.source.git.commit"] == COMMIT and tags["benchlib.testbed.torch"] == "2.14.1"
    assert tags["benchlib.testbed.hardware"] == "cpu; Xeon; node7"
    assert tags["benchlib.bounds.samples_per_s"].startswith("95% interval of the median")
    assert tags["benchlib.metric.device_name"] == "cpu" and tags["benchlib.study"] == "framework_comparison"

    spread = runs[three["run_id"]].data.metrics
    assert spread["samples_per_s_p10"] == pytest.approx(118.4) and spread["samples_per_s_n"] == 3
    assert (spread["data_share_low"], spread["data_share_high"]) == (0.01, 0.04)
    assert not [k for k in spread if "ci95" in k]  # a spread is never written as an interval
    assert runs[three["run_id"]].data.tags["benchlib.bounds.step_s"].startswith("p10-p90 spread")

    got = Path(client.download_artifacts(run.info.run_id, "", str(outputs / "back")))
    stored = json.loads((got / "record" / f"{five['run_id']}.json").read_text())
    assert stored["metrics"] == five["metrics"]
    assert (got / "notebook" / f"{five['run_id']}.ipynb").read_bytes() == \
        (outputs / five["executed_notebook"]).read_bytes()


def test_exporting_to_mlflow_twice_creates_nothing_new(tracking_uri, outputs, capsys):
    smoke_set(outputs, "twice")
    argv = ["export", "twice", "--to", "mlflow", "--tracking-uri", tracking_uri]
    assert main(argv) == 0
    client = client_of(tracking_uri)
    first = runs_of(client, "twice")
    assert main(argv) == 0
    assert "mlflow: 0 runs created, 2 already there" in capsys.readouterr().out
    again = runs_of(client, "twice")
    assert {k: r.info.run_id for k, r in again.items()} == \
        {k: r.info.run_id for k, r in first.items()}
    for run in again.values():
        assert len(client.get_metric_history(run.info.run_id, "samples_per_s")) == 1
        assert len(client.list_artifacts(run.info.run_id, "record")) == 1


def test_a_run_an_export_left_half_written_is_replaced_whole(tracking_uri, outputs):
    five, _ = smoke_set(outputs, "stopped")
    client = client_of(tracking_uri)
    exp = client.get_experiment_by_name("benchlib/framework") or \
        client.get_experiment(client.create_experiment("benchlib/framework"))
    half = client.create_run(exp.experiment_id, tags={"benchlib.run_id": five["run_id"],
                                                      "benchlib.label": "stopped"})
    assert main(["export", "stopped", "--to", "mlflow", "--tracking-uri", tracking_uri]) == 0
    runs = runs_of(client, "stopped")
    assert len(runs) == 2 and runs[five["run_id"]].info.run_id != half.info.run_id
    assert runs[five["run_id"]].info.status == "FINISHED"
    assert client.get_run(half.info.run_id).info.lifecycle_stage == "deleted"
