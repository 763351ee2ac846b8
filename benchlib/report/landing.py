"""The report's landing page: one line of findings per study and testbed, computed from
the records, and what the run tables show of each run.

A finding names the study's question and its headline figure with spread (p10-p90) and
n; every figure keeps the run ids it came from, so the page links each number to its
record and executed notebook. Figures are only taken from ok runs, ratios only between
runs of the same work on the same testbed, and a study with no ok run says so.

The headline itself is the study's analysis module's (benchlib.analysis.findings), over
the same selection notebook 90 reads (`results.latest_ok`, as a frame): notebook 90's
findings say the same sentence. This module groups record dicts (`results.read_records`)
by study and testbed and names the testbeds; no I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pandas as pd

from benchlib.analysis import findings as analysed
from benchlib.analysis.claims import Claim, run_metric
from benchlib.config import studies
from benchlib.records import results, testbed

Record = dict[str, Any]

# ---------------------------------------------------------------- testbeds

@dataclass(frozen=True)
class Testbed:
    """Where a record was measured (its `testbed`, see benchlib.records.testbed), as the
    page shows it: the machine and software its env names."""

    id: str
    host: str
    device: str  # "cpu" or "2 x NVIDIA H100 80GB HBM3"
    cpu: str
    torch: str
    cuda: str
    driver: str
    nccl: str
    allocator: str
    benchlib: str
    label: str = ""  # T1, T2, ... in order of first use

    def describe(self) -> list[tuple[str, str]]:
        return [("device", self.device), ("CPU", self.cpu), ("torch", self.torch),
                ("CUDA", self.cuda), ("driver", self.driver), ("NCCL", self.nccl),
                ("allocator", self.allocator), ("benchlib", self.benchlib),
                ("host", self.host), ("testbed id", self.id)]


def testbed_of(record: Record) -> Testbed:
    env = record.get("env") or {}
    bed = record.get("testbed") or testbed.from_env(env)
    identity = bed.get("identity") or {}
    cores = env.get("cpu_logical")
    cpu = (env.get("cpu_model") or "unknown CPU") + (f", {cores} logical cores" if cores else "")
    build = env.get("torch_cuda")
    cuda = (f"{build}" if env.get("cuda_available") else
            f"{build} build, no CUDA device" if build else "none (CPU build)")
    version = (env.get("packages") or {}).get("benchlib") or identity.get("benchlib")
    commit = identity.get("commit")
    return Testbed(id=str(bed.get("id")), host=str(bed.get("hosts") or env.get("hostname")
                                                   or "unknown host"),
                   device=testbed.devices(env), cpu=cpu,
                   torch=str((env.get("packages") or {}).get("torch") or "unknown"),
                   cuda=cuda, driver=str(env.get("nvidia_driver") or "none"),
                   nccl=str(env.get("nccl") or "none"),
                   allocator=testbed.allocator_name(env.get("allocator")),
                   benchlib=f"{version or 'unknown'}" + (f" (commit {commit[:10]})" if commit
                                                          else ""))


def testbeds(records: list[Record]) -> dict[str, Testbed]:
    """run_id -> its testbed, labelled T1, T2, ... in the order they were first used."""
    labels: dict[str, str] = {}
    out = {}
    for rec in sorted(records, key=lambda r: r["started_at"]):
        bed = testbed_of(rec)
        label = labels.setdefault(bed.id, f"T{len(labels) + 1}")
        out[rec["run_id"]] = dataclasses.replace(bed, label=label)
    return out


@dataclass
class Finding:
    """One line of the landing page: a study on one testbed."""

    study: str
    notebook: str
    question: str
    testbed: Testbed | None
    claims: list[Claim]  # the first is the headline, the rest are "also"
    runs: int
    failed: list[Record]
    caveat: str = ""

    @property
    def status(self) -> str:
        ok = self.runs - len(self.failed)
        if not ok:
            return f"no ok run: {len(self.failed)} failed"
        runs = count(self.runs, "run")
        return f"{runs}, all ok" if not self.failed else \
            f"{ok} of {self.runs} runs ok, {len(self.failed)} failed"

    def text(self) -> str:
        """The line as plain text (what the page shows, without its links)."""
        head = f"{self.study}: {self.question} "
        if not self.claims:
            first = self.failed[0]["error"] or {}
            why = f" (first error: {first.get('type', '?')}: {first.get('message', '')})"
            return head + f"No ok run, so no figure: {len(self.failed)} failed{why}."
        body = analysed.sentence(self.claims, self.caveat)
        where = f" Testbed {self.testbed.label}." if self.testbed else ""
        return head + body + where + f" ({self.status}.)"


def findings(records: list[Record]) -> list[Finding]:
    """One finding per study and testbed, in the registry's order, then study name: its
    headline from the newest ok record of each row (results.latest_ok), as notebook 90's."""
    beds = testbeds(records)
    groups: dict[tuple[str, str], list[Record]] = {}
    for rec in records:
        groups.setdefault((rec["study"], beds[rec["run_id"]].label), []).append(rec)
    out = []
    for (name, _), runs in groups.items():
        notebook = max(runs, key=lambda r: r["started_at"])["notebook"]
        entry = studies.of_notebook_entry(notebook)
        ok = results.latest_ok(runs)
        failed = sorted((r for r in runs if r["status"] != "ok"), key=lambda r: r["started_at"])
        if not ok:
            claims, caveat = [], ""
        elif entry is None:
            claims, caveat = [Claim(analysed.ok_runs(len(ok)),
                                    note=f"no headline figure is defined for {notebook}")], ""
        else:
            claims, caveat = analysed.headline(entry, results.frame(ok))
        question = entry.question if entry else f"What does {notebook} measure?"
        out.append(Finding(name, notebook, question, beds[runs[0]["run_id"]], claims,
                           len(runs), failed, caveat))
    return sorted(out, key=lambda f: (studies.order(f.study), f.study,
                                      f.testbed.label if f.testbed else ""))


# ---------------------------------------------------------------- run tables

def count(n: int, noun: str, nouns: str = "") -> str:
    """'1 run', '2 runs' (`nouns`: a plural of its own, 'studies')."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


def varying_params(records: list[Record]) -> list[str]:
    """The parameters whose value differs between the records: a run table's columns."""
    names = sorted({k for r in records for k in r["params"]})
    return [n for n in names if len({repr(r["params"].get(n)) for r in records}) > 1]


def headline_metric(rec: Record) -> tuple[str, str]:
    """(column name, value) that the run table shows for a run (analysis.claims.run_metric
    over its row of the records' frame)."""
    return run_metric(pd.Series(results.row(rec), dtype=object))
