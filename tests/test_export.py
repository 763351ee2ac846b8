"""`benchlib export` to files: Bencher's BMF and github-action-benchmark's JSON checked
against their schemas, TensorBoard's event files read back by TensorBoard's own reader,
the same bytes on a second export, `compare` reading a BMF export back, and bad input.
The MLflow round trip is tests/test_export_mlflow.py."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import jsonschema
import pytest

from benchlib.cli import main
from benchlib.compare import changes
from benchlib.core.stats import summarize
from benchlib.export import figures
from benchlib.export.files import SCHEMAS
from benchlib.records import results
from tests.export_sets import COMMIT, ENV, LAUNCHES, launches_set, smoke_set


def export(*argv: str) -> int:
    return main(["export", *argv])


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def test_a_figure_keeps_its_interval_or_names_its_spread_never_one_for_the_other(outputs):
    five, three = smoke_set(outputs)
    [launches, mfu, rate] = figures.figures(five["metrics"])
    ci = summarize(LAUNCHES, "samples_per_s")
    assert (rate.name, rate.bounds, rate.n) == ("samples_per_s", figures.CI95, 6)
    assert (rate.low, rate.value, rate.high) == (ci["samples_per_s_ci95_low"], 402.0,
                                                 ci["samples_per_s_ci95_high"])
    assert launches == figures.Figure("launches", 6.0) and mfu == figures.Figure("mfu", 0.31)
    by_name = {f.name: f for f in figures.figures(three["metrics"])}
    assert sorted(by_name) == ["data_share", "launches", "mfu", "samples_per_s", "step_s"]
    assert by_name["data_share"] == figures.Figure("data_share", 0.02, 0.01, 0.04, figures.STEPS)
    assert by_name["data_share"].bounds_text() == \
        "low-high over one run's steps 0.01-0.04 (no interval: n unknown)"
    spread = by_name["samples_per_s"]
    assert (spread.bounds, spread.low, spread.high, spread.n) == (
        figures.SPREAD, pytest.approx(118.4), pytest.approx(124.0), 3)
    assert spread.bounds_text() == "p10-p90 spread 118.4-124 (no interval: n=3)"
    assert rate.bounds_text().startswith("95% CI ") and rate.bounds_text().endswith("n=6")


def test_bmf_meets_benchers_schema_with_interval_spread_and_testbed_beside_it(outputs, capsys):
    smoke_set(outputs)
    assert export("smoke", "--to", "bmf") == 0
    folder = outputs / "export" / "smoke" / "bmf"
    doc = json.loads((folder / "bmf.json").read_text())
    jsonschema.validate(doc, schema("bmf.json"))
    one, two = doc["framework: nproc_per_node=1"], doc["framework: nproc_per_node=2"]
    ci = summarize(LAUNCHES, "samples_per_s")
    assert one == {"samples-per-s": {"value": 402.0, "lower_value": ci["samples_per_s_ci95_low"],
                                     "upper_value": ci["samples_per_s_ci95_high"]},
                   "mfu": {"value": 0.31}}  # the launch count is not a measurement
    assert sorted(two) == ["data-share-low-high", "mfu", "samples-per-s-p10-p90",
                           "step-s-p10-p90"]
    assert two["samples-per-s-p10-p90"] == {"value": 120.0, "lower_value": pytest.approx(118.4),
                                            "upper_value": pytest.approx(124.0)}
    side = json.loads((folder / "bencher.json").read_text())
    assert side["hash"] == COMMIT and side["testbed"]["name"] == "node7"
    assert side["testbed"]["identity"]["torch"] == "2.14.1"
    row = side["benchmarks"]["framework: nproc_per_node=2"]  # named by what varies; all kept
    assert row["params"] == {"nproc_per_node": 2, "model": "resnet18"}
    assert row["n"] == {"samples_per_s": 3, "step_s": 3}
    command = f"bencher run --testbed node7 --hash {COMMIT} --adapter json --file {folder}/bmf.json"
    assert side["command"] == command and command in capsys.readouterr().out


def test_github_action_benchmark_files_meet_its_interface_one_per_direction(outputs):
    smoke_set(outputs)
    assert export("smoke", "--to", "github-action-benchmark", "--out", str(outputs / "gab")) == 0
    bigger = json.loads((outputs / "gab" / "customBiggerIsBetter.json").read_text())
    smaller = json.loads((outputs / "gab" / "customSmallerIsBetter.json").read_text())
    for entries in (bigger, smaller):
        jsonschema.validate(entries, schema("github-action-benchmark.json"))
    names = {e["name"]: e for e in bigger}
    assert sorted(names) == ["framework: nproc_per_node=1 [mfu]",
                             "framework: nproc_per_node=1 [samples_per_s]",
                             "framework: nproc_per_node=2 [mfu]",
                             "framework: nproc_per_node=2 [samples_per_s]"]
    rate = names["framework: nproc_per_node=1 [samples_per_s]"]
    assert rate["value"] == 402.0 and rate["unit"] == "samples/s"
    assert rate["range"].startswith("95% CI ") and rate["range"].endswith(", n=6")
    assert "range" not in names["framework: nproc_per_node=1 [mfu]"]
    assert f"commit {COMMIT}" in rate["extra"] and "torch 2.14.1" in rate["extra"]
    [step] = smaller
    assert step["name"] == "framework: nproc_per_node=2 [step_s]" and step["unit"] == "s"
    assert step["range"] == "p10-p90 spread 0.0302-0.0334 (no interval: n=3)"
    assert step["value"] == pytest.approx(0.031)


def test_tensorboard_events_read_back_by_tensorboards_own_reader(outputs):
    pytest.importorskip("tensorboard", reason="the export extra is not installed")
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.util import tensor_util

    five, three = smoke_set(outputs)
    assert export("smoke", "--to", "tensorboard") == 0
    logdir = outputs / "export" / "smoke" / "tensorboard"

    def read(record):
        acc = ea.EventAccumulator(str(logdir / "framework" / record["run_id"]),
                                  size_guidance={ea.TENSORS: 0, ea.SCALARS: 0})
        acc.Reload()
        scalars = {t: acc.Scalars(t)[0].value for t in acc.Tags()["scalars"]}
        info = plugin_data_pb2.HParamsPluginData.FromString(
            acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]).session_start_info
        layout = layout_pb2.Layout.FromString(tensor_util.make_ndarray(
            acc.Tensors("custom_scalars__config__")[0].tensor_proto).item())
        return scalars, info, layout, acc.Scalars("samples_per_s")[0]

    scalars, info, layout, event = read(five)
    ci = summarize(LAUNCHES, "samples_per_s")
    assert scalars == pytest.approx({"samples_per_s": 402.0, "mfu": 0.31, "launches": 6.0,
                                     "samples_per_s/ci95_low": ci["samples_per_s_ci95_low"],
                                     "samples_per_s/ci95_high": ci["samples_per_s_ci95_high"],
                                     "samples_per_s/n": 6.0}, rel=1e-6)
    assert event.step == 0 and event.wall_time == pytest.approx(
        figures_time(five["finished_at"]))
    hp = {k: v.string_value or v.number_value for k, v in info.hparams.items()}
    assert hp["nproc_per_node"] == 1 and hp["benchlib.testbed.commit"] == COMMIT
    assert hp["benchlib.testbed.torch"] == "2.14.1" and hp["benchlib.testbed.hardware"] == \
        "cpu; Xeon; node7" and hp["benchlib.label"] == "smoke"
    [category] = layout.category
    assert category.title == "benchlib: median and 95% interval"
    assert [(s.value, s.lower, s.upper) for s in category.chart[0].margin.series] == [
        ("samples_per_s", "samples_per_s/ci95_low", "samples_per_s/ci95_high")]

    scalars, _, layout, _ = read(three)
    assert scalars["samples_per_s/p10"] == pytest.approx(118.4, rel=1e-6)
    assert scalars["data_share/low"] == pytest.approx(0.01, rel=1e-6)
    assert not [t for t in scalars if "ci95" in t]  # a spread is never written as an interval
    spread, steps = layout.category
    assert spread.title.startswith("benchlib: median and p10-p90 spread")
    assert [c.margin.series[0].lower for c in spread.chart] == ["samples_per_s/p10", "step_s/p10"]
    assert steps.title.startswith("benchlib: median and low-high over one run's steps")
    assert steps.chart[0].margin.series[0].upper == "data_share/high"


def figures_time(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_exporting_files_twice_rewrites_the_same_bytes_and_adds_nothing(outputs):
    pytest.importorskip("tensorboard", reason="the export extra is not installed")
    smoke_set(outputs)
    for target in ("bmf", "github-action-benchmark", "tensorboard"):
        assert export("smoke", "--to", target) == 0
    first = files_under(outputs / "export")
    assert len(first) == 2 + 2 + 2  # bmf and its sidecar, two directions, two runs' events
    for target in ("bmf", "github-action-benchmark", "tensorboard"):
        assert export("smoke", "--to", target) == 0
    assert files_under(outputs / "export") == first


def test_compare_reads_a_bmf_export_back(outputs, capsys):
    launches_set(outputs, "base")
    launches_set(outputs, "new", slow=0.8, env={**ENV, "packages": {"torch": "2.15.0",
                                                                   "benchlib": "0.1.0"}})
    for label in ("base", "new"):
        assert export(label, "--to", "bmf") == 0
    base = outputs / "export" / "base" / "bmf"
    doc = json.loads((base / "bmf.json").read_text())
    pooled = doc["io: workers=1"]["samples-per-s"]  # 6 records of the row: an interval over them
    assert pooled["lower_value"] < pooled["value"] < pooled["upper_value"]
    c = changes.compare_sets(str(base), str(outputs / "export" / "new" / "bmf" / "bmf.json"),
                              outputs / "results")
    assert "read back from BMF" in c.base.describe() and c.base.label == "base"
    rows = c.rows.set_index("row")
    assert rows.loc["workers=1", "ratio"] == pytest.approx(0.8, abs=0.01)
    assert rows.loc["workers=0", "ratio"] == pytest.approx(1.0, abs=0.01)
    assert set(rows["verdict"]) == {"inconclusive"} and set(rows["n_base"]) == {1}
    assert ("testbed torch", "2.14.1", "2.15.0") in c.env_diff
    # a BMF export beside the records of a set: the same rows (every parameter kept beside)
    assert main(["compare", str(base), "new", "--outputs", str(outputs)]) == 0
    assert "2 rows in common" in capsys.readouterr().out


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv, message", [
    (["smoke", "--to", "wandb"], "to: 'wandb' is not a target; targets: mlflow, tensorboard, "
                                 "bmf, github-action-benchmark"),
    (["smoke"], "to: missing; targets: mlflow"),
    (["nothing", "--to", "bmf"], "nothing: no result set with that label"),
    (["failed", "--to", "bmf"], "failed: result set failed has no ok record"),
    (["smoke", "--to", "bmf", "--table", "io"], "table: 'io' is not in result set smoke; its "
                                                "tables: framework"),
    (["smoke", "--to", "tensorboard", "--out", "{file}"], "out: {file} cannot be written"),
    (["smoke", "--to", "bmf", "--out", "{file}/bmf"], "out: {file}/bmf cannot be written"),
    (["smoke", "--to", "mlflow", "--tracking-uri", "http://127.0.0.1:{port}"],
     "tracking_uri: http://127.0.0.1:{port} is unreachable"),
    (["smoke", "--to", "mlflow", "--tracking-uri", "file:///tmp/mlruns"],
     "tracking_uri: 'file:///tmp/mlruns' must be an http:// or https://"),
    (["two-testbeds", "--to", "github-action-benchmark"],
     "testbed: github-action-benchmark takes one testbed a file and these records are on 2"),
])
def test_bad_input_is_one_line_naming_the_parameter_exit_2_and_nothing_written(
        outputs, capsys, argv, message):
    smoke_set(outputs)
    for record in smoke_set(outputs / "elsewhere", "failed"):  # a set of failed records only
        record.update(status="failed", error={"type": "LaunchError", "message": "rank 1 died"})
        results.write_record(outputs / "results", record)
    smoke_set(outputs, "two-testbeds")
    smoke_set(outputs, "two-testbeds", env={**ENV, "hostname": "node8"})  # the rows elsewhere
    in_the_way = outputs / "a-file"
    in_the_way.write_text("mine\n")
    fields = {"file": str(in_the_way), "port": str(closed_port())}
    before = files_under(outputs)
    capsys.readouterr()
    assert export(*[a.format(**fields) for a in argv], "--outputs", str(outputs)) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchlib export: " + message.format(**fields)), err
    assert err.count("\n") == 1
    assert files_under(outputs) == before
