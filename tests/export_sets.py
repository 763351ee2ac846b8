"""Result sets for the export tests, written as a sweep writes them (records.results), with
figures summarized by core.stats as the studies summarize theirs: one row with an interval
(6 independent launches: the fewest whose median gets a 95% interval), one with only its
spread (3 values inside one process), a figure with a direction but no spread, a count, a
text metric, and an executed notebook beside each record."""

from __future__ import annotations

import json
from pathlib import Path

from benchlib.core.stats import summarize
from benchlib.records import results, testbed

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ENV = {"hostname": "node7", "cpu_model": "Xeon", "gpus": [], "python": "3.11.9",
       "packages": {"torch": "2.14.1", "benchlib": "0.1.0"}, "torch_cuda": None,
       "allocator": {"name": "glibc", "glibc_tunables": ""}, "env_vars": {}}
LAUNCHES = [410.0, 402.0, 398.0, 405.0, 400.0, 402.0]  # samples/s of 6 launches: an interval
WINDOWS = [118.0, 120.0, 125.0]  # samples/s of 3 windows inside one launch: a spread only
STEPS = [0.031, 0.030, 0.034]


def bed(env: dict | None = None) -> dict:
    return testbed.from_env(env or ENV, commit=COMMIT)


def write_record(outputs: Path, label: str, table: str, params: dict, metrics: dict,
                 env: dict | None = None, run_id: str | None = None) -> dict:
    """A record of `table` written under `outputs`/results, its executed notebook beside."""
    b = bed(env)
    # a record per row, testbed and set (a sweep takes the next free id: records.read)
    run_id = run_id or \
        f"{results.run_id_for(table, '40_framework_comparison.ipynb', params, b['id'])}-{label}"
    notebook = Path("notebooks") / table / f"{run_id}.ipynb"
    (outputs / notebook).parent.mkdir(parents=True, exist_ok=True)
    (outputs / notebook).write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                                "nbformat_minor": 5}))
    rec = results.make_record(run_id=run_id, table=table, notebook="40_framework_comparison.ipynb",
                              params=params, env=env or ENV, started_at=results.now(),
                              status="ok", metrics=metrics, executed_notebook=str(notebook),
                              label=label, testbed=b)
    results.write_record(outputs / "results", rec)
    return rec


def smoke_set(outputs: Path, label: str = "smoke", env: dict | None = None) -> list[dict]:
    """Two rows of table `framework`: nproc 1 over 6 launches (samples/s with a 95%
    interval), nproc 2 inside one launch (samples/s and step time with only a spread, the
    data share with its low-high over steps); each with MFU (a direction, no spread), a
    count and the device's name."""
    one = {**summarize(LAUNCHES, "samples_per_s"), "mfu": 0.31, "launches": 6,
           "device_name": "cpu"}
    two = {**summarize(WINDOWS, "samples_per_s", independent=False),
           **summarize(STEPS, "step_s", independent=False), "mfu": 0.18, "launches": 1,
           "device_name": "cpu",
           # a share of a step with its low-high over the run's steps (core/throughput.py)
           "data_share": 0.02, "data_share_low": 0.01, "data_share_high": 0.04}
    return [write_record(outputs, label, "framework",
                         {"nproc_per_node": n, "model": "resnet18", "path": "/data"}, metrics, env)
            for n, metrics in ((1, one), (2, two))]


def launches_set(outputs: Path, label: str, slow: float = 1.0, env: dict | None = None) -> None:
    """Table `io`: two rows, each launched 6 times (6 records, as `sweep --force` adds them),
    samples/s around 100 and 200 within 1%; the second row's times `slow`."""
    for i, level in enumerate((100.0, 200.0 * slow)):
        for launch in range(6):
            value = level * (1 + 0.01 * ((launch * 7) % 6 - 2) / 2)
            params = {"workers": i, "dataset": "cifar10"}
            base = results.run_id_for("io", "nb", params, bed(env)["id"])
            write_record(outputs, label, "io", params, {"samples_per_s": value}, env,
                         run_id=f"{base}-{label}-{launch}")
