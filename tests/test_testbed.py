"""Testbeds and result sets: a row's identity includes where it ran, reruns add to the
history, old records still load, and Slurm partitions sharing outputs never mix."""

import json
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from conftest import ROOT, TRIVIAL, write_params

from benchlib.cli import main
from benchlib.compare import changes
from benchlib.core import allocator
from benchlib.records import results, testbed
from benchlib.runs.params import load_plan
from benchlib.runs.sweep import run_plan

ENV = {"hostname": "h1", "cpu_model": "Xeon", "gpus": [{"name": "H100"}, {"name": "H100"}],
       "packages": {"torch": "2.14.1", "benchlib": "0.1.0"}, "torch_cuda": "13.0",
       "cudnn": 91900, "nccl": "2.28.9", "allocator": {"name": "glibc", "glibc_tunables": ""}}


def test_the_testbed_id_changes_with_what_changes_a_measurement_and_only_that():
    base = testbed.from_env(ENV, commit="abc")
    assert base == testbed.from_env(json.loads(json.dumps(ENV)), commit="abc")
    assert base["identity"]["devices"] == "2 x H100" and base["name"] == "h1"
    changed = [
        {**ENV, "packages": {**ENV["packages"], "torch": "2.15.0"}},
        {**ENV, "hostname": "h2"},
        {**ENV, "gpus": [{"name": "H100"}]},
        {**ENV, "cpu_model": "EPYC"},
        {**ENV, "nccl": "2.29"},
        {**ENV, "allocator": {"name": "glibc", "glibc_tunables": allocator.TUNED}},
    ]
    ids = {testbed.from_env(env, commit="abc")["id"] for env in changed}
    assert base["id"] not in ids and len(ids) == len(changed)
    assert testbed.from_env(ENV, commit="def")["id"] != base["id"]
    # what does not change a measurement does not change the testbed
    assert testbed.from_env({**ENV, "python": "3.12", "memory_bytes": 1}, "abc")["id"] == base["id"]
    tuned = testbed.from_env(changed[-1])
    assert tuned["identity"]["allocator"] == "glibc (tuned)"


def test_this_process_has_a_testbed_with_its_commit():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    testbed.git_commit.cache_clear()
    commit = testbed.git_commit()
    assert commit == head and re.fullmatch(r"[0-9a-f]{40}", commit)
    here = testbed.current()
    assert here["identity"]["commit"] == commit
    assert here["identity"]["kind"] == "local" and len(here["id"]) == 12


def test_labels_are_checked_and_the_default_one_is_reused_by_its_testbed():
    assert testbed.check_label("torch-2.15_run.1") == "torch-2.15_run.1"
    for bad in ("", "a b", "../x", "-x"):
        with pytest.raises(testbed.UsageError, match="label: "):
            testbed.check_label(bad)
    bed = testbed.from_env(ENV, "abc")
    first = testbed.default_label([], bed, today=date(2026, 11, 26))
    assert first == f"h1-{bed['id'][:6]}-20261126"
    earlier = [{"testbed": bed, "label": first, "finished_at": "2026-11-26T10:00"},
               {"testbed": bed, "label": "mine", "finished_at": "2026-11-27T10:00"}]
    assert testbed.default_label(earlier, bed, today=date(2026, 12, 1)) == first
    other = testbed.from_env({**ENV, "hostname": "h2"})
    assert testbed.default_label(earlier, other, today=date(2026, 12, 1)).endswith("-20261201")


def test_a_version_1_record_loads_with_a_testbed_from_its_env(tmp_path):
    old = {"schema_version": 1, "run_id": "0123456789ab", "study": "s", "notebook": "n.ipynb",
           "params": {"x": 1}, "env": ENV, "method_version": "1",
           "started_at": "2026-01-01T00:00:00.000+00:00",
           "finished_at": "2026-01-01T00:00:05.000+00:00", "status": "ok", "error": None,
           "metrics": {"samples_per_s": 10.0}, "details": {}, "executed_notebook": None,
           "executor": {"name": "local"}}
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "0123456789ab.json").write_text(json.dumps(old))
    [rec] = results.read_records(tmp_path)
    assert rec["testbed"] == testbed.from_env(ENV)
    assert rec["label"] == f"h1-{rec['testbed']['id'][:6]}-v1"
    df = results.load_results(tmp_path)
    assert df.iloc[0]["label"] == rec["label"] and df.iloc[0]["testbed"] == "h1"
    assert df.iloc[0]["samples_per_s"] == 10.0
    # its `study` named its table; the study is now its notebook's
    assert (rec["schema_version"], rec["table"], rec["study"]) == (3, "s", "n")


def test_a_version_2_record_names_its_table_and_its_notebooks_study(tmp_path):
    new = results.make_record(run_id="0123456789ab", table="io_workers",
                              notebook="10_single_device_io.ipynb", params={"x": 1}, env=ENV,
                              started_at=results.now(), status="ok")
    assert (new["study"], new["table"], new["schema_version"]) == ("single_device_io",
                                                                   "io_workers", 3)
    old = {k: v for k, v in new.items() if k != "table"}
    old.update(schema_version=2, study="io_workers")  # as version 2 wrote it
    (tmp_path / "io_workers").mkdir()
    (tmp_path / "io_workers" / "0123456789ab.json").write_text(json.dumps(old))
    [rec] = results.read_records(tmp_path)
    assert rec == new  # the same record as this version writes
    df = results.load_results(tmp_path, "single_device_io")  # picked by its study ...
    assert list(df["table"]) == ["io_workers"] and list(df["study"]) == ["single_device_io"]
    assert len(results.load_results(tmp_path, "io_workers")) == 1  # ... or by its table
    # a version 3 record without its table is refused by name
    (tmp_path / "io_workers" / "0123456789ab.json").write_text(json.dumps({**old,
                                                                          "schema_version": 3}))
    assert results.read_records(tmp_path) == []


def test_a_new_record_carries_its_testbed_and_label(tmp_path):
    bed = testbed.from_env(ENV, "abc")
    rec = results.make_record(run_id="r", table="s", notebook="n", params={}, env=ENV,
                              started_at=results.now(), status="ok", label="before", testbed=bed)
    assert rec["schema_version"] == 3 and rec["label"] == "before" and rec["testbed"] == bed
    assert results.read_record(results.write_record(tmp_path, rec)) == rec
    with pytest.raises(testbed.UsageError, match="label: 'a/b'"):
        results.make_record(run_id="r", table="s", notebook="n", params={}, env=ENV,
                            started_at=results.now(), status="ok", label="a/b")


def trivial(tmp_path, xs=(1, 2)):
    rows = "\n".join(f"  - {{x: {x}}}" for x in xs)
    return write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable:\n{rows}\n")


def files(outputs, sub="results", pattern="*.json"):
    return {p.name: p.read_bytes() for p in (outputs / sub / "t").glob(pattern)}


def test_another_testbed_runs_the_row_again_and_the_same_one_skips_it(tmp_path, outputs,
                                                                      monkeypatch):
    file = trivial(tmp_path)
    assert run_plan(load_plan(file), outputs, progress=False).ok == 2
    assert run_plan(load_plan(file), outputs, progress=False).skipped == 2  # as before
    here = testbed.current()
    other = testbed.from_env({**ENV, "hostname": "elsewhere"})
    monkeypatch.setattr(testbed, "current", lambda: other)
    summary = run_plan(load_plan(file), outputs, progress=False)
    assert (summary.ok, summary.skipped) == (2, 0)  # not the other machine's numbers
    df = results.load_results(outputs / "results")
    assert len(df) == 4 and sorted(set(df["testbed_id"])) == sorted({here["id"], other["id"]})
    assert len(set(df["label"])) == 2  # each testbed its own default set
    assert len(results.load_results(outputs / "results", testbed=other["id"][:6])) == 2
    # the newest ok record of each row on each testbed: two measurements of the same rows
    latest = results.load_results(outputs / "results", latest=True)
    assert len(latest) == 4 and set(latest["testbed_id"]) == {here["id"], other["id"]}


def test_force_and_a_new_label_add_records_and_never_overwrite_an_ok_one(tmp_path, outputs):
    file = trivial(tmp_path, xs=(1,))
    run_plan(load_plan(file), outputs, progress=False, label="before")
    kept = {**files(outputs), **files(outputs, "runs", "*.ipynb")}
    assert run_plan(load_plan(file), outputs, progress=False, label="before").skipped == 1
    assert run_plan(load_plan(file), outputs, force=True, progress=False, label="before").ok == 1
    assert run_plan(load_plan(file), outputs, progress=False, label="after").ok == 1
    assert run_plan(load_plan(file), outputs, progress=False, label="after").skipped == 1
    assert run_plan(load_plan(file), outputs, progress=False).skipped == 1  # done in some set
    now = {**files(outputs), **files(outputs, "runs", "*.ipynb")}
    assert all(now[name] == data for name, data in kept.items())  # untouched
    run_id = load_plan(file)[0].run_id
    assert sorted(files(outputs)) == [f"{run_id}-2.json", f"{run_id}-3.json", f"{run_id}.json"]
    df = results.load_results(outputs / "results")
    assert sorted(df["label"]) == ["after", "before", "before"]
    assert len(results.load_results(outputs / "results", label="before")) == 2
    latest = results.load_results(outputs / "results", latest=True)
    assert list(latest["label"]) == ["after"] and list(latest["run_id"]) == [f"{run_id}-3"]
    for rec in df.itertuples():  # each record has its own executed notebook
        assert (outputs / rec.executed_notebook).name == f"{rec.run_id}.ipynb"


def test_a_failed_record_is_replaced_only_within_its_result_set(tmp_path, outputs):
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable:\n  - {{x: 1, fail: true}}\n")
    [row] = load_plan(file)
    run_plan([row], outputs, progress=False, label="a")
    run_plan([row], outputs, progress=False, label="a")  # retried: replaces its own failure
    assert sorted(files(outputs)) == [f"{row.run_id}.json"]
    run_plan([row], outputs, progress=False, label="b")  # another set's failure is history
    assert sorted(files(outputs)) == [f"{row.run_id}-2.json", f"{row.run_id}.json"]


def test_cli_label_and_dry_run_name_the_result_set(tmp_path, outputs, capsys):
    file = trivial(tmp_path, xs=(1,))
    assert main(["sweep", str(file), "--no-progress", "--label", "first"]) == 0
    capsys.readouterr()
    assert main(["sweep", str(file), "--dry-run", "--label", "second"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("run  t/") and "result set second, testbed " in out.err
    assert main(["sweep", str(file), "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("skip t/")
    assert main(["sweep", str(file), "--label", "bad label"]) == 2
    assert "label: 'bad label' must be" in capsys.readouterr().err
    assert main(["run", str(TRIVIAL), "-p", "x", "1", "--study", "t", "--label", "first"]) == 0
    record = Path(capsys.readouterr().out.split("record: ")[1].strip())
    assert json.loads(record.read_text())["label"] == "first"


def test_a_measurement_from_the_shell_adds_a_record_each_time(small_data, outputs, capsys):
    args = ["io", "1", "cpu", "--path", str(small_data), "--dataset", "mydataset",
            "--repeats", "1", "--warmup-steps", "1", "--label", "shell"]
    assert main(args) == 0 and main(args) == 0
    paths = [Path(line.split("record: ")[1]) for line in capsys.readouterr().out.splitlines()
             if line.startswith("record: ")]
    assert paths[1].name == paths[0].stem + "-2.json"  # the first one is kept
    records = [json.loads(p.read_text()) for p in paths]
    assert [r["label"] for r in records] == ["shell", "shell"]
    assert records[0]["testbed"]["id"] == testbed.current()["id"]


# ------------------------------------------------------------------------------ Slurm

def test_two_partitions_sharing_one_outputs_folder_never_mix(slurm_cluster, tmp_path):
    """The test cluster's partitions debug (n1, n2) and solo (n1) on one BENCHLIB_OUTPUTS:
    each runs the row for itself, into its own result set, and then skips it."""
    env = {**slurm_cluster, "BENCHLIB_OUTPUTS": str(tmp_path / "out")}
    file = write_params(tmp_path, f"name: t\nnotebook: {TRIVIAL}\ntable:\n  - {{x: 3}}\n")

    def sweep(partition):
        done = subprocess.run([sys.executable, "-m", "benchlib", "sweep", str(file), "--executor",
                               "slurm", "--partition", partition, "--no-progress"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "1 ok, 0 failed, 0 skipped" in sweep("debug")
    assert "1 ok, 0 failed, 0 skipped" in sweep("solo")  # not debug's numbers
    assert "0 ok, 0 failed, 1 skipped" in sweep("solo")
    records = results.read_records(tmp_path / "out" / "results")
    beds = {r["testbed"]["identity"]["partition"]: r for r in records}
    assert sorted(beds) == ["debug", "solo"] and len(records) == 2
    assert beds["solo"]["testbed"]["identity"]["nodes_hardware"].startswith("1 x cpus=")
    assert beds["debug"]["testbed"]["identity"]["nodes_hardware"].startswith("2 x cpus=")
    assert beds["solo"]["label"] != beds["debug"]["label"]
    assert beds["solo"]["testbed"]["hosts"] == "n1"  # where the task ran
    assert beds["solo"]["executor"]["name"] == "slurm"
    compared = subprocess.run([sys.executable, "-m", "benchlib", "compare",
                               beds["debug"]["label"], beds["solo"]["label"]], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
    # the rows match (trivial rows have no metric with a direction to compare: one line)
    assert compared.returncode == 2
    assert compared.stderr.strip().splitlines()[-1].startswith("benchlib compare: metric: no row")
    diff = {w: (b, a) for w, b, a in changes.env_diff([beds["debug"]], [beds["solo"]])}
    assert diff["testbed partition"] == ("debug", "solo") and "testbed torch" not in diff
