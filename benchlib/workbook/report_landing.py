"""The report's landing page: one line of findings per study and testbed, computed from
the records, and what the run tables show of each run.

A finding names the study's question and its headline figure with spread (p10-p90) and
n; every figure keeps the records it came from, so the page links each number to its
record and executed notebook. Figures are only taken from ok runs, ratios only between
runs of the same work on the same testbed, and a study with no ok run says so.

Pure functions over record dicts (`results.read_records`): no pandas, no I/O.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from benchlib.core.timing import quantile
from benchlib.workbook import testbed

Record = dict[str, Any]

QUESTIONS = {
    "00_data_prep.ipynb": "Which data sets are here, real or generated?",
    "10_single_device_io.ipynb": "How fast does data reach the model, per DataLoader "
                                 "setting and storage variant?",
    "benchlib io (CLI)": "How fast does data reach the model, per DataLoader setting and "
                         "storage variant?",
    "20_dp_vs_ddp.ipynb": "Does DDP beat one process and DataParallel here, and by how much?",
    "30_multinode_lightning.ipynb": "How does throughput scale across nodes, with raw DDP "
                                    "and Lightning?",
    "35_fault_tolerance.ipynb": "What does losing a rank cost?",
    "40_framework_comparison.ipynb": "How fast does ResNet train here, and how close to the "
                                     "hardware's peak (MFU)?",
    "45_scaling_projection.ipynb": "How far would these figures scale, and what stops them?",
}
# parameters shown as their value alone in a run's label ("preload traverse"), the rest
# as name=value ("num_workers=2")
BARE = ("dataset", "variant", "mode", "model", "arch", "strategy", "trainer", "launcher",
        "precision")


# ---------------------------------------------------------------- testbeds

@dataclass(frozen=True)
class Testbed:
    """Where a record was measured (its `testbed`, see benchlib.workbook.testbed), as the
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


def newest_ok(records: list[Record]) -> list[Record]:
    """The newest ok record of each row (notebook and parameters): reruns and other
    result sets of a row count once."""
    newest: dict[str, Record] = {}
    for rec in sorted((r for r in records if r["status"] == "ok"),
                      key=lambda r: r["finished_at"]):
        newest[json.dumps([rec["notebook"], rec["params"]], sort_keys=True, default=str)] = rec
    return list(newest.values())


# ---------------------------------------------------------------- figures and findings

@dataclass
class Figure:
    """One number on the page and the runs it came from ("" the run, or a role such as
    "baseline")."""

    value: str
    what: str = ""
    spread: tuple[str, str] | None = None  # p10, p90 as shown
    n: str = ""
    sources: list[tuple[str, Record]] = field(default_factory=list)

    def text(self) -> str:
        extra = [f"p10-p90 {self.spread[0]}-{self.spread[1]}"] if self.spread else []
        extra += [self.n] if self.n else []
        return " ".join(filter(None, [self.value, self.what])) + \
            (f" ({', '.join(extra)})" if extra else "")


@dataclass
class Claim:
    """"<subject>: <figure>; <note>", e.g. "DDP via torchrun on 2 gloo ranks: 1.13x over
    one process (p10-p90 1.11-1.16, n=2 epochs each)"."""

    subject: str
    figure: Figure | None = None
    note: str = ""

    def text(self) -> str:
        out = self.subject + (f": {self.figure.text()}" if self.figure else "")
        return out + (f"; {self.note}" if self.note else "")


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
        runs = f"{self.runs} run{'s' if self.runs > 1 else ''}"
        return f"{runs}, all ok" if not self.failed else \
            f"{ok} of {self.runs} runs ok, {len(self.failed)} failed"

    def text(self) -> str:
        """The line as plain text (what the page shows, without its links)."""
        head = f"{self.study}: {self.question} "
        if not self.claims:
            first = self.failed[0]["error"] or {}
            why = f" (first error: {first.get('type', '?')}: {first.get('message', '')})"
            return head + f"No ok run, so no figure: {len(self.failed)} failed{why}."
        body = self.claims[0].text() + "."
        if len(self.claims) > 1:
            body += " Also: " + "; ".join(c.text() for c in self.claims[1:]) + "."
        if self.caveat:
            body += " " + self.caveat
        where = f" Testbed {self.testbed.label}." if self.testbed else ""
        return head + body + where + f" ({self.status}.)"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) else float(value)


def _fmt(value: float) -> str:
    """Three significant figures, thousands separated: 12,300 / 45.6 / 0.123."""
    if value == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
    return f"{round(value, digits):,.{digits}f}"


def metric(rec: Record, name: str) -> float | None:
    return _num((rec.get("metrics") or {}).get(name))


def _n(rec: Record, name: str, unit: str) -> str:
    count = metric(rec, f"{name}_n")
    return f"n={int(count)} {unit}" if count else ""


def samples_figure(rec: Record, unit: str) -> Figure | None:
    """A run's median samples/s with its p10-p90 over `unit`s (repeats, epochs)."""
    sps = metric(rec, "samples_per_s")
    if sps is None:
        return None
    lo, hi = metric(rec, "samples_per_s_p10"), metric(rec, "samples_per_s_p90")
    spread = (_fmt(lo), _fmt(hi)) if lo is not None and hi is not None else None
    return Figure(_fmt(sps), "samples/s", spread,
                  _n(rec, "samples_per_s", unit), [("", rec)])


def ratio_figure(rec: Record, base: Record, what: str, unit: str) -> Figure | None:
    """samples/s of `rec` over those of `base`; the spread pairs p10 with p90 (the widest
    the two spreads allow), n counts both runs' samples."""
    a, b = metric(rec, "samples_per_s"), metric(base, "samples_per_s")
    if not a or not b:
        return None
    a10, a90 = metric(rec, "samples_per_s_p10"), metric(rec, "samples_per_s_p90")
    b10, b90 = metric(base, "samples_per_s_p10"), metric(base, "samples_per_s_p90")
    spread = (f"{a10 / b90:.2f}", f"{a90 / b10:.2f}") if a10 and a90 and b10 and b90 else None
    na, nb = metric(rec, "samples_per_s_n"), metric(base, "samples_per_s_n")
    n = "" if not (na and nb) else f"n={int(na)} {unit} each" if na == nb \
        else f"n={int(na)} and {int(nb)} {unit}"
    return Figure(f"{a / b:.2f}x", what, spread, n, [("", rec), ("baseline", base)])


def _varying(records: list[Record]) -> list[str]:
    names = sorted({k for r in records for k in r["params"]})
    return [n for n in names if len({repr(r["params"].get(n)) for r in records}) > 1]


def label(rec: Record, names: list[str]) -> str:
    parts = []
    for name in names:
        value = rec["params"].get(name)
        parts.append(str(value) if name in BARE else f"{name}={value}")
    return " ".join(parts)


def _same(records: list[Record], keys: tuple[str, ...]) -> dict[tuple, list[Record]]:
    groups: dict[tuple, list[Record]] = {}
    for rec in records:
        groups.setdefault(tuple(repr(rec["params"].get(k)) for k in keys), []).append(rec)
    return groups


def _device(records: list[Record]) -> str:
    names = sorted({str((r.get("metrics") or {}).get("device_name")) for r in records
                    if (r.get("metrics") or {}).get("device_name")})
    return ", ".join(names)


def _shared_cores(records: list[Record], ranks: Callable[[Record], float]) -> str:
    """The caveat, only where a record shows its cause: several ranks on a CPU."""
    if any(_device([r]) == "cpu" and ranks(r) > 1 for r in records):
        return ("Several ranks on one CPU share its cores: the ratios say what launching "
                "and all-reducing cost here, not what more devices would give.")
    return ""


def _above_linear(claims: list[Claim]) -> str:
    """The caveat, only where the records show it: a ratio over a baseline that is more
    than the ratio of their ranks, with the threads per rank each ran, when they differ."""
    odd = []
    for claim in claims:
        fig = claim.figure
        if fig is None or [role for role, _ in fig.sources] != ["", "baseline"]:
            continue
        run, base = fig.sources[0][1], fig.sources[1][1]
        ranks = _ranks(run) / _ranks(base)
        a, b = metric(run, "samples_per_s"), metric(base, "samples_per_s")
        if a and b and ranks > 1 and a / b > ranks * 1.05:
            odd.append((fig, run, base, ranks))
    if not odd:
        return ""
    fig, run, base, ranks = odd[0]
    text = (f"{len(odd)} of these ratios exceed the rank count (e.g. {fig.value} with "
            f"{ranks:g}x the ranks): more than linear is not what more ranks give")
    mine, theirs = metric(run, "threads_per_rank"), metric(base, "threads_per_rank")
    if mine and theirs and mine != theirs:
        text += (f"; the baseline ran {theirs:g} threads per rank and this run {mine:g}, and "
                 "threads that compete for cores (other load, oversubscription) slow a run down")
    return text + ". Rerun both on an idle machine before reading them as scaling."


def _caveats(*texts: str) -> str:
    return " ".join(t for t in texts if t)


# ---------------------------------------------------------------- per notebook

def _data_prep(ok: list[Record]) -> tuple[list[Claim], str]:
    rec = max(ok, key=lambda r: r["finished_at"])  # the latest preparation describes the data
    m = rec.get("metrics") or {}
    first = ("fashion_mnist", "mydataset", "cifar10", "imagefolder")
    names = sorted((k[:-len("_samples")] for k in m if k.endswith("_samples")),
                   key=lambda n: (first.index(n) if n in first else len(first), n))
    claims = []
    for name in names:
        source = m.get(f"{name}_source", "unknown source")
        claims.append(Claim(name.replace("_", "-"), Figure(f"{int(m[f'{name}_samples']):,}",
                                                           f"samples, {source}",
                                                           sources=[("", rec)])))
    generated = [c for c in claims if "generated" in c.figure.what]
    caveat = ("Generated data has the real on-disk format: IO figures are comparable, "
              "accuracy figures are not." if generated else "")
    return claims, caveat


IO_CONTEXT = ("dataset", "mode", "device", "model", "batch_size", "epochs")


def _io(ok: list[Record]) -> tuple[list[Claim], str]:
    """Per context (data set, mode, device, ...): the fastest setting of the knobs that were
    swept (variant, num_workers, ...), and how many times the slowest one it is."""
    measured = [r for r in ok if metric(r, "samples_per_s")]
    varying = [n for n in _varying(measured) if n not in ("seed", "path")]
    context = [n for n in varying if n in IO_CONTEXT]
    knobs = [n for n in varying if n not in IO_CONTEXT]
    claims = []
    for _, group in sorted(_same(measured, tuple(context)).items()):
        ranked = sorted(group, key=lambda r: -metric(r, "samples_per_s"))
        best, worst = ranked[0], ranked[-1]
        device = _device(group)
        where = " ".join(filter(None, [label(best, context), f"on {device}" if device else ""]))
        if len(ranked) == 1:
            claims.append(Claim(" ".join(filter(None, [where, label(best, knobs)])) or "run",
                                samples_figure(best, "repeats")))
            continue
        claims.append(Claim(f"{where}: fastest {label(best, knobs)}",
                            samples_figure(best, "repeats")))
        claims.append(Claim(f"{where}: {label(best, knobs)} against the slowest, "
                            f"{label(worst, knobs)}",
                            ratio_figure(best, worst, "the samples/s", "repeats")))
    return claims, ""


def _ranks(rec: Record) -> float:
    m = rec.get("metrics") or {}
    return _num(m.get("world_size")) or _num(m.get("devices")) or \
        _num(rec["params"].get("nproc_per_node")) or 1


def _dist(ok: list[Record]) -> tuple[list[Claim], str]:
    work = ("dataset", "model", "depth", "alpha", "batch_size", "device")
    claims: list[tuple[tuple, Claim]] = []
    for group in _same(ok, work).values():
        singles = [r for r in group if r["params"].get("strategy") == "single"]
        base = singles[0] if len(singles) == 1 else None
        for rec in group:
            p, m = rec["params"], rec.get("metrics") or {}
            if p.get("strategy") == "single":
                continue
            ranks = int(_ranks(rec))
            backend = m.get("backend_used") or m.get("backend") or p.get("backend")
            if p.get("strategy") == "dp":
                subject, order = f"DataParallel on {ranks} device(s)", (2, "")
            else:
                subject = f"DDP via {p.get('launcher')} on {ranks} {backend} ranks"
                order = (0 if p.get("launcher") == "torchrun" else 1, p.get("launcher"))
            figure = ratio_figure(rec, base, "over one process", "epochs") if base else None
            if figure is None:
                claims.append((order, Claim(subject, samples_figure(rec, "epochs"),
                                            "no single-process run of the same work to "
                                            "compare with")))
            else:
                claims.append((order, Claim(subject, figure)))
    if not claims:  # only single-process runs
        return [Claim(f"one process, {label(r, ['model', 'dataset'])}",
                      samples_figure(r, "epochs")) for r in ok], ""
    ordered = [c for _, c in sorted(claims, key=lambda oc: oc[0])]
    return ordered, _caveats(_shared_cores(ok, _ranks), _above_linear(ordered))


def _multinode(ok: list[Record]) -> tuple[list[Claim], str]:
    work = ("trainer", "dataset", "model", "depth", "alpha", "batch_size", "device")
    claims: list[tuple[tuple, Claim]] = []
    for group in _same(ok, work).values():
        ones = [r for r in group if _ranks(r) == 1]
        base = ones[0] if len(ones) == 1 else None  # two baselines: which one is ambiguous
        for rec in group:
            if _ranks(rec) == 1:
                continue
            p = rec["params"]
            subject = (f"{p.get('trainer')} via {p.get('launcher')} on {p.get('nnodes')} node(s) "
                       f"x {p.get('nproc_per_node')}")
            order = (-_ranks(rec), p.get("trainer") != "ddp", p.get("launcher") != "torchrun")
            figure = ratio_figure(rec, base, f"over 1 rank of {p.get('trainer')}",
                                  "epochs") if base else None
            note = "" if figure else "no 1-rank run of the same trainer and work to compare with"
            claims.append((order, Claim(subject, figure or samples_figure(rec, "epochs"), note)))
    if not claims:
        return [Claim(f"{r['params'].get('trainer')} on 1 rank", samples_figure(r, "epochs"))
                for r in ok], ""
    ordered = [c for _, c in sorted(claims, key=lambda oc: oc[0])]
    return ordered, _caveats(_shared_cores(ok, _ranks), _above_linear(ordered))


def _fault(ok: list[Record]) -> tuple[list[Claim], str]:
    setup = ("model", "dataset", "nproc_per_node", "fail_at_step", "checkpoint_every")
    claims = []
    for group in _same(ok, setup).values():
        p = group[0]["params"]
        subject = (f"{p.get('nproc_per_node')} ranks, a rank killed after step "
                   f"{p.get('fail_at_step')}, a checkpoint every {p.get('checkpoint_every')}")
        recovered = [r for r in group if (metric(r, "restarts") or 0) > 0
                     and metric(r, "recovery_s") is not None]
        if not recovered:
            claims.append(Claim(subject, note="no restart happened, so no recovery time"))
            continue
        times = sorted(metric(r, "recovery_s") for r in recovered)
        spread = (f"{quantile(times, 0.1):.1f} s", f"{quantile(times, 0.9):.1f} s") \
            if len(times) > 1 else None
        figure = Figure(f"{statistics.median(times):.1f} s", "back to training", spread,
                        f"n={len(times)} failure{'s' if len(times) > 1 else ''}",
                        [("", r) for r in recovered])
        redone = sorted({int(metric(r, "steps_redone") or 0) for r in recovered})
        notes = [f"{'/'.join(map(str, redone))} step(s) redone"]
        diffs = [(metric(r, "loss_diff"), metric(r, "loss_last")) for r in recovered]
        if all(d is not None and last is not None for d, last in diffs):
            same = all(d <= 1e-6 * max(abs(last), 1) for d, last in diffs)
            notes.append("final loss equal to the uninterrupted run's" if same else
                         "final loss differs from the uninterrupted run's")
        claims.append(Claim(subject, figure, ", ".join(notes)))
    return claims, ""


def _variant(rec: Record) -> str:
    p = rec["params"]
    return (str(p.get("precision")) + ("+nhwc" if p.get("channels_last") else "")
            + ("+compile" if p.get("compile") else ""))


def _framework(ok: list[Record]) -> tuple[list[Claim], str]:
    work = ("arch", "dataset", "image_size", "batch_size", "device")
    one, more = [], []
    for group in _same(ok, work).values():
        for rec in group:
            p = rec["params"]
            what = (f"{p.get('arch')} {p.get('image_size')}px batch {p.get('batch_size')} "
                    f"{p.get('dataset')} {_variant(rec)}")
            if (_num(p.get("nproc_per_node")) or 1) == 1:
                mfu = metric(rec, "mfu")
                note = f"MFU {mfu:.1%}" if mfu is not None else \
                    "MFU unknown: no published peak for this device"
                device = _device([rec]) or p.get("device")
                order = (p.get("dataset") != "synthetic", _variant(rec) != "fp32", what)
                one.append((order, Claim(f"{what} on 1 {device}", samples_figure(rec, "repeats"),
                                         note)))
                continue
            bases = [r for r in group if (_num(r["params"].get("nproc_per_node")) or 1) == 1
                     and _variant(r) == _variant(rec)]
            figure = ratio_figure(rec, bases[0], "over 1 device", "repeats") \
                if len(bases) == 1 else None
            more.append(((what,), Claim(f"{what} on {p.get('nproc_per_node')} devices",
                                        figure or samples_figure(rec, "repeats"),
                                        "" if figure else "no 1-device run to compare with")))
    claims = [c for _, c in sorted(one, key=lambda oc: oc[0])] + \
        [c for _, c in sorted(more, key=lambda oc: oc[0])]
    ranks = [r for r in ok if (_num(r["params"].get("nproc_per_node")) or 1) > 1]
    return claims, _caveats(
        _shared_cores(ranks, lambda r: _num(r["params"].get("nproc_per_node")) or 1),
        _above_linear(claims))


def _projection(ok: list[Record]) -> tuple[list[Claim], str]:
    claims = []
    for rec in sorted(ok, key=lambda r: r["started_at"]):
        m = rec.get("metrics") or {}
        largest, stops = metric(rec, "largest_devices"), metric(rec, "stops_at_devices")
        eff = metric(rec, "efficiency_largest")
        if largest is None or eff is None:
            continue
        note = f"{m.get('stops_by')} sets the step from {stops:,.0f} devices" if stops else \
            "compute sets the step at every size"
        check = metric(rec, "check_median_abs_error_pct")
        note += f"; the model is {check:.1f}% off seed 003's 2- and 4-node rows (median)" \
            if check is not None else ""
        claims.append(Claim(f"projected from {m.get('compute_source')}",
                            Figure(f"{eff:.0%}", f"efficiency at {largest:,.0f} devices",
                                   sources=[("", rec)]), note))
    return claims, ""


HEADLINES: dict[str, Callable[[list[Record]], tuple[list[Claim], str]]] = {
    "00_data_prep.ipynb": _data_prep,
    "10_single_device_io.ipynb": _io,
    "benchlib io (CLI)": _io,
    "20_dp_vs_ddp.ipynb": _dist,
    "30_multinode_lightning.ipynb": _multinode,
    "35_fault_tolerance.ipynb": _fault,
    "40_framework_comparison.ipynb": _framework,
    "45_scaling_projection.ipynb": _projection,
}
ORDER = list(HEADLINES)


def findings(records: list[Record]) -> list[Finding]:
    """One finding per study and testbed, in notebook order, then study name."""
    beds = testbeds(records)
    groups: dict[tuple[str, str], list[Record]] = {}
    for rec in records:
        groups.setdefault((rec["study"], beds[rec["run_id"]].label), []).append(rec)
    out = []
    for (study, _), runs in groups.items():
        notebook = max(runs, key=lambda r: r["started_at"])["notebook"]
        ok = newest_ok(runs)
        failed = sorted((r for r in runs if r["status"] != "ok"), key=lambda r: r["started_at"])
        claims, caveat = [], ""
        if ok:
            headline = HEADLINES.get(notebook)
            if headline is None:
                claims = [Claim(f"{len(ok)} ok run(s)",
                                note=f"no headline figure is defined for {notebook}")]
            else:
                claims, caveat = headline(ok)
                if not claims:
                    claims = [Claim(f"{len(ok)} ok run(s)", note="none of them reported "
                                    "the figure this study is summarised by")]
        out.append(Finding(study, notebook, QUESTIONS.get(notebook, f"What does {notebook} "
                                                           "measure?"),
                           beds[runs[0]["run_id"]], claims, len(runs), failed, caveat))
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(out, key=lambda f: (rank.get(f.notebook, len(rank)), f.study,
                                      f.testbed.label if f.testbed else ""))


# ---------------------------------------------------------------- run tables

def headline_metric(rec: Record) -> tuple[str, str]:
    """(column name, value) that the run table shows for a run: samples/s with spread, a
    fault run's recovery time, a data preparation's seconds."""
    if rec["notebook"] == "35_fault_tolerance.ipynb":
        value = metric(rec, "recovery_s")
        return "recovery", "" if value is None else f"{value:.1f} s"
    if rec["notebook"] == "00_data_prep.ipynb":
        value = metric(rec, "prep_s")
        return "prepared in", "" if value is None else f"{value:.1f} s"
    fig = samples_figure(rec, "")
    if fig is None:
        return "samples/s (p10-p90)", ""
    return "samples/s (p10-p90)", fig.value + (f" ({fig.spread[0]}-{fig.spread[1]})"
                                               if fig.spread else "")
