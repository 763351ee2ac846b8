import json
import os

import numpy as np
import pytest

from benchlib import atomic
from benchlib.errors import RecordError
from benchlib.records import results


def record(**kw):
    base = dict(run_id="abc123", table="s", notebook="n.ipynb", params={"num_workers": 2},
                env={"hostname": "h1", "cpu_model": "cpu", "gpus": [], "packages": {"torch": "2.14.1"}},
                started_at="2026-01-01T00:00:00.000+00:00", status="ok",
                metrics={"samples_per_s": 100.0}, executed_notebook="runs/s/abc123.ipynb")
    base.update(kw)
    return results.make_record(**base)


def test_record_has_every_required_field_and_round_trips(tmp_path):
    rec = record()
    assert set(results.REQUIRED) <= set(rec)
    path = results.write_record(tmp_path, rec)
    assert path == tmp_path / "s" / "abc123.json"
    assert results.read_record(path) == rec
    assert rec["schema_version"] == results.SCHEMA_VERSION and rec["method_version"]


def test_status_must_be_ok_or_failed():
    with pytest.raises(RecordError, match="status: 'done' is not one of ok, failed"):
        record(status="done")


def test_a_metric_may_not_reuse_a_parameter_name():
    with pytest.raises(RecordError, match="metrics: num_workers already name parameters"):
        record(metrics={"num_workers": 3})


def test_run_id_is_stable_and_changes_with_any_parameter():
    a = results.run_id_for("io", "10_single_device_io", {"num_workers": 2, "dataset": "x"})
    assert a == results.run_id_for("io", "10_single_device_io", {"dataset": "x", "num_workers": 2})
    assert a != results.run_id_for("io", "10_single_device_io", {"dataset": "x", "num_workers": 3})
    assert a != results.run_id_for("io2", "10_single_device_io", {"dataset": "x", "num_workers": 2})
    assert len(a) == 12


def test_numpy_scalars_become_numbers_and_nan_becomes_null(tmp_path):
    path = atomic.write_json(tmp_path / "x.json", {"a": np.float32(1.5), "b": float("nan"),
                                                   "c": np.int64(3)})
    assert json.loads(path.read_text()) == {"a": 1.5, "b": None, "c": 3}


def test_an_interrupted_write_leaves_the_old_record_and_no_partial_file(tmp_path, monkeypatch):
    path = results.write_record(tmp_path, record())
    before = path.read_bytes()

    def killed(fd):
        raise KeyboardInterrupt  # what Ctrl-C (or a signal) does between write and rename

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        results.write_record(tmp_path, record(metrics={"samples_per_s": 1.0}))
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["abc123.json"]


def test_an_unstorable_value_writes_nothing(tmp_path):
    with pytest.raises(RecordError, match="cannot store object in a JSON record"):
        results.write_record(tmp_path, record(metrics={"x": object()}))
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


def test_load_results_flattens_params_metrics_and_env(tmp_path):
    results.write_record(tmp_path, record())
    results.write_record(tmp_path, record(run_id="def456", status="failed", metrics={},
                                          error={"type": "ValueError", "message": "boom"}))
    (tmp_path / "s" / ".def456.json.x.tmp").write_text("{half")  # a temp file is ignored
    df = results.load_results(tmp_path)
    assert len(df) == 2
    ok = df[df.run_id == "abc123"].iloc[0]
    assert ok["num_workers"] == 2 and ok["samples_per_s"] == 100.0
    assert ok["host"] == "h1" and ok["torch"] == "2.14.1" and ok["duration_s"] >= 0
    failed = df[df.run_id == "def456"].iloc[0]
    assert failed["status"] == "failed" and failed["error"] == "boom"
    assert len(results.load_results(tmp_path, study="other")) == 0


def test_publish_writes_the_metrics_file_the_sweep_names(tmp_path, monkeypatch):
    target = tmp_path / "m.json"
    monkeypatch.setenv(results.METRICS_FILE_VAR, str(target))
    results.publish({"samples_per_s": np.float64(12.5)}, details={"per_repeat": [1, 2]})
    assert json.loads(target.read_text()) == {"metrics": {"samples_per_s": 12.5},
                                              "details": {"per_repeat": [1, 2]}}


def test_publish_refuses_a_non_scalar_metric(monkeypatch, tmp_path):
    monkeypatch.setenv(results.METRICS_FILE_VAR, str(tmp_path / "m.json"))
    with pytest.raises(RecordError, match="metrics: per_step must be a number or a string"):
        results.publish({"per_step": [1, 2, 3]})
    assert not (tmp_path / "m.json").exists()


def test_publish_without_a_sweep_returns_metrics_and_stores_nothing(monkeypatch, capsys):
    monkeypatch.delenv(results.METRICS_FILE_VAR, raising=False)
    assert results.publish({"x": 1}) == {"x": 1}
    assert "not run by a sweep" in capsys.readouterr().err


def _bad_files(results_dir):
    (results_dir / "s").mkdir(parents=True, exist_ok=True)
    (results_dir / "s" / "truncated.json").write_text('{"run_id": "x", "stud')
    (results_dir / "s" / "other.json").write_text('{"foo": 1}')


def test_a_bad_record_file_is_skipped_with_one_warning_naming_it(tmp_path, capsys):
    results.write_record(tmp_path, record())
    _bad_files(tmp_path)
    df = results.load_results(tmp_path)
    assert list(df["run_id"]) == ["abc123"]
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"benchlib: skipped {tmp_path / 's' / 'other.json'}: not a benchlib record (no "
        + ", ".join(results.REQUIRED) + ")",
        f"benchlib: skipped {tmp_path / 's' / 'truncated.json'}: not valid JSON "
        "(Unterminated string starting at, line 1)"]
    assert results.load_details(tmp_path, "repeats").empty
    with pytest.raises(results.UnreadableRecord, match="truncated.json: not valid JSON"):
        results.read_record(tmp_path / "s" / "truncated.json")


def test_a_rows_broken_record_counts_as_missing_so_the_row_runs_again(tmp_path, capsys):
    _bad_files(tmp_path)
    assert results.find_record(tmp_path, "s", "truncated") is None
    assert "skipped" in capsys.readouterr().err


def test_the_report_keeps_the_last_good_analysis_when_the_analysis_fails(tmp_path):
    from benchlib.report import publish
    from tests.conftest import TRIVIAL

    report_dir = tmp_path / "report"
    assert "analysis.html" in publish._analysis_link(TRIVIAL, None, report_dir)
    good = (report_dir / "analysis.html").read_text()
    line = publish._analysis_link(TRIVIAL, {"message": "boom"}, report_dir)
    assert (report_dir / "analysis.html").read_text() == good
    assert (report_dir / "analysis-failed.html").exists()
    assert "analysis failed: boom" in line and 'href="analysis.html"' in line


def test_records_are_written_with_the_users_umask_so_a_shared_folder_is_readable(tmp_path):
    old = os.umask(0o027)
    try:
        group = atomic.write_json(tmp_path / "g.json", {"a": 1})
        os.umask(0o022)
        everyone = atomic.write_text(tmp_path / "e.txt", "x")
    finally:
        os.umask(old)
    assert group.stat().st_mode & 0o777 == 0o640
    assert everyone.stat().st_mode & 0o777 == 0o644


def test_records_of_the_wrong_shape_are_skipped_with_a_warning_naming_each(tmp_path, capsys):
    from conftest import write_wrong_shapes

    good = record()
    results.write_record(tmp_path, good)
    wrong = write_wrong_shapes(tmp_path, good)
    df = results.load_results(tmp_path)
    assert list(df["run_id"]) == ["abc123"]
    err = capsys.readouterr().err.splitlines()
    assert sorted(err) == sorted(f"benchlib: skipped {path}: {why}" for path, why in wrong)
    for path, why in wrong:
        with pytest.raises(results.UnreadableRecord, match=why.replace("(", r"\(").replace(")", r"\)")):
            results.read_record(path)


def test_a_record_written_before_a_rename_reads_as_the_same_row_as_one_written_after(tmp_path):
    """Notebook 40's `arch` is now `model` and `compile: true` is `default`: a record that
    still holds them reads with its params as a row is read now and what it held as
    params_raw, so latest_ok keeps one record of the row (the newer), and its frame has
    the model's column; a record without old names reads as it was written."""
    now = {"model": "resnet18", "compile": "default", "device": "cpu"}
    old = record(run_id="0ld0ld0ld0ld", table="fw", notebook="40_framework_comparison.ipynb",
                 params={"arch": "resnet18", "compile": True, "device": "cpu"},
                 started_at="2026-01-01T00:00:00.000+00:00")
    new = record(run_id="111111111111", table="fw", notebook="40_framework_comparison.ipynb",
                 params=now, started_at="2026-02-01T00:00:00.000+00:00")
    old["finished_at"], new["finished_at"] = ("2026-01-01T00:10:00.000+00:00",
                                              "2026-02-01T00:10:00.000+00:00")
    for rec in (old, new):
        results.write_record(tmp_path, rec)
    read = {r["run_id"]: r for r in results.read_records(tmp_path)}
    assert read["0ld0ld0ld0ld"]["params"] == now
    assert read["0ld0ld0ld0ld"]["params_raw"] == old["params"]
    assert read["111111111111"] == new and "params_raw" not in new
    assert [r["run_id"] for r in results.latest_ok(list(read.values()))] == ["111111111111"]
    df = results.load_results(tmp_path)
    assert list(df["model"]) == ["resnet18", "resnet18"] and "arch" not in df


def test_a_records_params_raw_must_be_a_mapping(tmp_path, capsys):
    path = results.write_record(tmp_path, record(params_raw={"arch": "resnet18"}))
    assert results.read_record(path)["params_raw"] == {"arch": "resnet18"}
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, "params_raw": ["arch"]}))
    assert results.read_records(tmp_path) == []
    assert "params_raw is a list, not a mapping" in capsys.readouterr().err
