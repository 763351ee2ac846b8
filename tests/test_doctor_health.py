"""`benchlib doctor --health`: the outlier rule on given numbers, a rank slowed on purpose
named by host and device, the record and its testbed figures, and `compare` naming a
device that got slower."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchlib.compare import changes, view
from benchlib.compare.sets import ResultSet, health_changes
from benchlib.core import health
from benchlib.records import results, testbed

ROOT = Path(__file__).resolve().parents[1]
ENV = {"hostname": "vm", "cpu_model": "Xeon", "gpus": [], "python": "3.12.3",
       "packages": {"torch": "2.14.1", "benchlib": "0.1.0"}, "torch_cuda": None,
       "allocator": {"name": "glibc", "glibc_tunables": ""}, "env_vars": {}}
MATMUL_LINE = re.compile(r"doctor: matmul 1024x1024 fp32 x20: rank (\d) on (\S+) \(cpu\): "
                         r"([0-9.e+-]+) TFLOP/s")


def benchlib(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "benchlib", *args], cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------ the outlier rule

def test_exactly_ten_percent_below_the_median_is_not_an_outlier():
    assert health.outliers({"a": 100.0, "b": 100.0, "c": 90.0}) == []


def test_eleven_percent_below_the_median_is_an_outlier_named_in_its_line():
    found = health.outliers({"a": 100.0, "b": 100.0, "c": 89.0})
    assert [(o.name, o.value, o.median) for o in found] == [("c", 89.0, 100.0)]
    assert found[0].below == pytest.approx(0.11)
    lines = health.outlier_lines({"rank 2 on node3 (cuda:1 H100)": 89.0, "rank 0 on node1 "
                                  "(cuda:0 H100)": 100.0, "rank 1 on node2 (cuda:0 H100)": 100.0},
                                 {"node1 and node2": 40.0, "node1 and node3": 20.0,
                                  "node2 and node3": 40.0})
    assert lines == ["doctor: slow device: rank 2 on node3 (cuda:1 H100): 89 TFLOP/s, 11% below "
                     "the median 100",
                     "doctor: slow node pair: node1 and node3: busbw 20 GB/s, 50% below the "
                     "median 40"]


def test_no_outlier_is_one_line_with_the_medians():
    assert health.outlier_lines({"rank 0 on vm (cpu)": 1.0, "rank 1 on vm (cpu)": 0.95}, {}) == [
        "doctor: no outlier: every device within 10% of the median 0.975 TFLOP/s"]
    assert health.outlier_lines({"x": 1.0}, {"a and b": 10.0, "a and c": 9.5}) == [
        "doctor: no outlier: every device within 10% of the median 1 TFLOP/s, every node "
        "pair within 10% of the median busbw 9.75 GB/s"]


# ------------------------------------------------------------------ bad input

def test_a_slow_rank_outside_the_launch_is_refused_in_one_line():
    done = benchlib("doctor", "--device", "cpu", "--health", "--slow-rank", "2")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("benchlib doctor: slow_rank: 2 is not a rank of this launch "
                           "(ranks 0-1)\n")


def test_a_health_flag_without_health_is_refused():
    done = benchlib("doctor", "--device", "cpu", "--slow-rank", "1")
    assert done.returncode == 2
    assert done.stderr == "benchlib doctor: slow_rank: only means something with --health\n"


# ------------------------------------------------------------------ real ranks

def _record(stdout: str) -> dict:
    path = re.search(r"^record: (.+)$", stdout, re.MULTILINE).group(1)
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="module")
def health_run(tmp_path_factory) -> subprocess.CompletedProcess:
    """`benchlib doctor --health` over two tcp ranks with rank 1's matmul slowed three-fold
    on purpose, launched once and read by both tests below. The slowing changes rank 1's
    TFLOP/s only (and so its slow-device line, which a run on two busy cores may print
    anyway): what the run reports and records, every rank's figure, the all-reduce, the
    record's testbed, is the same run's. tcp ranks, not torchrun's: the report is the
    subject, not the launcher (no agent)."""
    out = tmp_path_factory.mktemp("health")
    done = subprocess.run([sys.executable, "-m", "benchlib", "doctor", "--device", "cpu",
                           "--health", "--slow-rank", "1", "--slow-factor", "3", "--launcher",
                           "tcp"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1",
                               "BENCHLIB_OUTPUTS": str(out / "outputs")})
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.distributed
def test_a_health_run_reports_every_ranks_tflops_the_all_reduce_and_records_them(health_run):
    done = health_run
    ranks = {int(m.group(1)): float(m.group(3)) for m in MATMUL_LINE.finditer(done.stdout)}
    assert sorted(ranks) == [0, 1] and all(v > 0 for v in ranks.values())
    assert re.search(r"doctor: all-reduce 4 MiB: one host \(\S+\), no pair of nodes; over its 2 "
                     r"ranks: busbw [0-9.e+-]+ GB/s", done.stdout)
    # two ranks share two busy cores: either all within 10%, or a slow-device line
    verdicts_ = [line for line in done.stdout.splitlines()
                 if line.startswith(("doctor: no outlier", "doctor: slow device"))]
    assert verdicts_ and all(re.fullmatch(r"doctor: (no outlier: every device within 10% of the "
                                          r"median \S+ TFLOP/s|slow device: rank \d on \S+ \(cpu\)"
                                          r": \S+ TFLOP/s, \d+% below the median \S+)", line)
                             for line in verdicts_)
    rec = _record(done.stdout)
    assert (rec["study"], rec["table"], rec["status"]) == ("doctor", "doctor_health", "ok")
    assert rec["metrics"]["tflops_median"] > 0 and rec["metrics"]["host_busbw_gbps"] > 0
    bed = rec["testbed"]["health"]
    assert [(d["rank"], d["device"]) for d in bed["devices"]] == [(0, "cpu"), (1, "cpu")]
    assert bed["pairs"] == [] and bed["one_host"]["ranks"] == [0, 1]


@pytest.mark.distributed
def test_a_rank_slowed_three_fold_on_purpose_is_named_by_host_and_device(health_run):
    done = health_run
    slow = [line for line in done.stdout.splitlines() if line.startswith("doctor: slow device")]
    assert len(slow) == 1 and re.fullmatch(r"doctor: slow device: rank 1 on \S+ \(cpu\): \S+ "
                                           r"TFLOP/s, \d+% below the median \S+", slow[0])
    assert "rank 1 on" in done.stdout and "(slowed on purpose)" in done.stdout
    outliers = _record(done.stdout)["testbed"]["health"]["outliers"]
    assert [(o["kind"], o["name"].split(" on ")[0]) for o in outliers] == [("device", "rank 1")]


# ------------------------------------------------------------------ compare

def _set(label: str, tflops: list[float], pairs: list[tuple[str, str, float]] = ()) -> ResultSet:
    """One row of 3 launches, and a doctor --health record whose testbed holds `tflops`
    (rank r on host vm) and node `pairs`."""
    bed = testbed.from_env(ENV, commit="c0ffee")
    rng = np.random.default_rng(len(label))
    records = [results.make_record(
        run_id=f"{label}-{launch}", table="bench_io", notebook="10_single_device_io.ipynb",
        params={"row": 0}, env=ENV, started_at=results.now(), status="ok",
        metrics={"samples_per_s": 100.0},
        details={"epochs": [{"samples_per_s": float(v), "repeat": launch}
                            for v in 100 + rng.standard_normal(3)]},
        label=label, testbed=bed) for launch in range(3)]
    figures = {"devices": [{"rank": r, "host": "vm", "device": "cpu", "tflops": t}
                           for r, t in enumerate(tflops)],
               "pairs": [{"hosts": [a, b], "ranks": [0, 1], "busbw_gbps": bw}
                         for a, b, bw in pairs]}
    records.append(results.make_record(
        run_id=f"{label}-doctor", table="doctor_health", notebook="benchlib doctor (CLI)",
        params={"nproc_per_node": 2}, env=ENV, started_at=results.now(), status="ok",
        metrics={"tflops_median": float(np.median(tflops))}, label=label,
        testbed={**bed, "health": figures}))
    return ResultSet(label, Path("/nowhere") / label, records)


def test_compare_says_which_device_and_node_pair_got_slower():
    base = _set("BASE", [0.080, 0.080], [("n1", "n2", 10.0)])
    new = _set("NEW", [0.080, 0.044], [("n1", "n2", 9.5)])
    assert health_changes(base, new, 0.10) == [
        "health: rank 1's device on vm (cpu) is 45% slower than in BASE (0.044 against 0.08 "
        "TFLOP/s)."]
    slower_pair = _set("NEW", [0.080, 0.080], [("n1", "n2", 5.0)])
    assert health_changes(base, slower_pair, 0.10) == [
        "health: the all-reduce between n1 and n2 is 50% slower than in BASE (busbw 5 against "
        "10 GB/s)."]
    report = view.text_report(changes.compare(base, new))
    assert "health: rank 1's device on vm (cpu) is 45% slower than in BASE" in report


def test_compare_says_nothing_of_health_when_a_set_has_no_doctor_record():
    base, new = _set("BASE", [0.08, 0.08]), _set("NEW", [0.08, 0.04])
    base.records = [r for r in base.records if r["table"] != "doctor_health"]
    assert health_changes(base, new, 0.10) == []
    assert not any(s.startswith("health:") for s in view.sentences(changes.compare(base, new)))
