"""The published report: findings first, then the analysis, the testbeds, the failures
and every run, as a static site that works from file:// with no network.

    outputs/report/index.html                    findings per study, testbeds, failures, runs
    outputs/report/analysis.html                 notebooks/90_analysis.ipynb, executed fresh
    outputs/report/<study>/<run_id>.html         each run's executed notebook, code hidden
    outputs/report/records/<study>/<run_id>.json each run's record, as the sweep wrote it
    outputs/report/static/notebook.css           JupyterLab's CSS, shared by the pages
    outputs/report/compare.html                  notebook 95, when two result sets share a row
    outputs/benchlib-report.zip                  with --zip: the folder, to hand around

HTML comes from nbconvert with `exclude_input=True` (what `--no-input` does; papermill's
report mode is ignored by nbconvert), no prompts, and benchlib/report_template, which
drops the template's CDN scripts. Every link is relative. A page already made from the
same notebook, header and template is kept.
"""

from __future__ import annotations

import html
import sys
import zipfile
from pathlib import Path
from typing import Any

from benchlib import atomic, paths
from benchlib.core import hostload
from benchlib.errors import BenchlibError
from benchlib.workbook import report_landing as landing
from benchlib.workbook import report_pages as pages
from benchlib.workbook import results, sweep

ANALYSIS_NOTEBOOK = "90_analysis.ipynb"
COMPARE_NOTEBOOK = "95_compare.ipynb"
ZIP_NAME = "benchlib-report.zip"


def run_analysis(outputs: Path) -> tuple[Path, dict[str, Any] | None]:
    """Execute the analysis over every record; returns (executed notebook, error or None)."""
    executed = outputs / "runs" / "analysis" / ANALYSIS_NOTEBOOK
    error = sweep.execute(paths.notebooks_dir() / ANALYSIS_NOTEBOOK, executed,
                          {"results_dir": str(outputs / "results")},
                          {"BENCHLIB_OUTPUTS": str(outputs)})
    return executed, error


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222;
line-height:1.45;padding:0 1em}table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px
solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em;vertical-align:top}th{background:#f3f3f3}
.ok{color:#17632a}.failed{color:#a31515;font-weight:bold}code{font-size:.85em}a{color:#0b57a4}
.lede{font-size:1.05em}.findings{list-style:none;padding:0}.findings>li{margin:0 0 1.1em;
padding:.5em .8em;border-left:4px solid #0b57a4;background:#f7f9fc}.findings li.none{border-color:#a31515}
.question{color:#444;font-style:italic}.headline{font-size:1.05em;margin:.25em 0}
.src{font-size:.8em;color:#555;white-space:nowrap}.also{font-size:.9em;margin:.2em 0 .3em;
padding-left:1.2em}.also li{margin:.1em 0}
.meta{font-size:.85em;color:#555}.caveat{font-size:.85em;color:#6b4e00}h3{margin-top:1.6em}"""


def _rel(report_dir: Path, target: Path) -> str:
    return target.relative_to(report_dir).as_posix()


class Site:
    """Where each run's page and record are in the report (paths under report_dir)."""

    def __init__(self, report_dir: Path, outputs: Path):
        self.report_dir, self.outputs = report_dir, outputs
        self.pages: dict[str, Path] = {}
        self.records: dict[str, Path] = {}

    def links(self, rec: dict[str, Any], role: str = "") -> str:
        """"notebook, record" links of one run, for a figure's sources."""
        run = rec["run_id"]
        out = []
        if run in self.pages:
            out.append(f'<a href="{_rel(self.report_dir, self.pages[run])}">notebook</a>')
        out.append(f'<a href="{_rel(self.report_dir, self.records[run])}">record</a>')
        return (f"{role}: " if role else "") + ", ".join(out)


def publish_runs(records: list[dict[str, Any]], outputs: Path, report_dir: Path,
                 beds: dict[str, landing.Testbed], analysis_sections: list[tuple[str, str]]) -> Site:
    """Copy every record into the report and convert every executed notebook to its page,
    headed by what ran and a link to its study's section of the analysis."""
    site = Site(report_dir, outputs)
    for rec in records:
        src = results.record_path(outputs / "results", rec["study"], rec["run_id"])
        target = report_dir / "records" / rec["study"] / f"{rec['run_id']}.json"
        if not target.exists() or target.read_bytes() != src.read_bytes():
            atomic.write_bytes(target, src.read_bytes())
        site.records[rec["run_id"]] = target
        executed = outputs / rec["executed_notebook"] if rec["executed_notebook"] else None
        if executed and executed.exists():
            page = report_dir / rec["study"] / f"{rec['run_id']}.html"
            header = pages.run_header(rec, beds[rec["run_id"]], page, report_dir,
                                      pages.injected(executed), target,
                                      pages.section_for(rec["notebook"], analysis_sections))
            site.pages[rec["run_id"]] = pages.convert(
                executed, page, report_dir, header,
                f"{rec['study']} · run {rec['run_id']} · benchlib report")
    return site


# ---------------------------------------------------------------- index.html

def _figure(fig: landing.Figure, site: Site) -> str:
    e = html.escape
    first = fig.sources[0][1] if fig.sources else None
    value = e(fig.value)
    if first is not None and first["run_id"] in site.pages:
        value = f'<a href="{_rel(site.report_dir, site.pages[first["run_id"]])}">{value}</a>'
    extra = [f"p10-p90 {e(fig.spread[0])}-{e(fig.spread[1])}"] if fig.spread else []
    extra += [e(fig.n)] if fig.n else []
    text = f"<strong>{value}</strong>" + (f" {e(fig.what)}" if fig.what else "") + \
        (f" ({', '.join(extra)})" if extra else "")
    sources = "; ".join(site.links(rec, role) for role, rec in fig.sources)
    return text + (f' <span class="src">[{sources}]</span>' if sources else "")


def _claim(claim: landing.Claim, site: Site) -> str:
    out = html.escape(claim.subject)
    if claim.figure:
        out += ": " + _figure(claim.figure, site)
    return out + (f"; {html.escape(claim.note)}" if claim.note else "")


def _finding(f: landing.Finding, site: Site, analysis_sections: list[tuple[str, str]],
             analysis_ok: bool) -> str:
    e = html.escape
    lines = [f'<strong>{e(f.study)}</strong> <span class="question">{e(f.question)}</span>']
    if f.claims:
        lines.append(f'<div class="headline">{_claim(f.claims[0], site)}.</div>')
        if len(f.claims) > 1:
            lines.append('<ul class="also">'
                         + "".join(f"<li>{_claim(c, site)}</li>" for c in f.claims[1:]) + "</ul>")
    else:
        first = f.failed[0]
        err = first["error"] or {}
        lines.append(f'<div class="headline failed">No ok run, so no figure: {len(f.failed)} '
                     f'failed (first error: {e(err.get("type", "?"))}: '
                     f'{e(err.get("message", ""))}; {site.links(first)}).</div>')
    if f.caveat:
        lines.append(f'<div class="caveat">{e(f.caveat)}</div>')
    meta = [f'testbed <a href="#testbed-{e(f.testbed.label)}">{e(f.testbed.label)}</a>'
            if f.testbed else "", e(f.status)]
    if f.failed and f.claims:
        meta[-1] = f'<a href="#failures">{meta[-1]}</a>'
    meta.append(f'<a href="#runs-{e(f.study)}">its runs</a>')
    section = pages.section_for(f.notebook, analysis_sections)
    if section and analysis_ok:
        meta.append(f'<a href="analysis.html#{e(section[0])}">analysis: {e(section[1])}</a>')
    lines.append(f'<div class="meta">{" · ".join(m for m in meta if m)}</div>')
    return f'<li class="{"none" if not f.claims else "some"}">{"".join(lines)}</li>'


def _lede(records: list[dict[str, Any]], beds: dict[str, landing.Testbed]) -> str:
    ok = sum(r["status"] == "ok" for r in records)
    studies = len({r["study"] for r in records})
    labels = len({b.label for b in beds.values()})
    first = min(r["started_at"] for r in records)[:16].replace("T", " ")
    last = max(r["finished_at"] for r in records)[:16].replace("T", " ")
    sets = sorted({str(r.get("label")) for r in records})
    in_sets = (f" in result set {html.escape(sets[0])}" if len(sets) == 1 else
               f" in {len(sets)} result sets" if sets else "")
    return (f'<p class="lede">{len(records)} runs in {studies} studies ({ok} ok, '
            f'{len(records) - ok} failed) on {labels} testbed(s){in_sets}, between {first} and '
            f"{last} UTC. Each line answers one study's question with its headline figure "
            "(the newest ok run of each row), its spread (p10-p90) and n; every figure links "
            "to the executed notebook and the record it came from.</p>")


def _testbeds(records: list[dict[str, Any]], beds: dict[str, landing.Testbed]) -> str:
    e = html.escape
    by_label: dict[str, landing.Testbed] = {}
    counts: dict[str, int] = {}
    for rec in records:
        bed = beds[rec["run_id"]]
        by_label.setdefault(bed.label, bed)
        counts[bed.label] = counts.get(bed.label, 0) + 1
    names = [k for k, _ in next(iter(by_label.values())).describe()]
    head = "".join(f"<th>{e(n)}</th>" for n in ["testbed", *names, "runs"])
    rows = "".join(
        f'<tr id="testbed-{e(label)}"><td>{e(label)}</td>'
        + "".join(f"<td>{e(v)}</td>" for _, v in bed.describe())
        + f"<td>{counts[label]}</td></tr>" for label, bed in sorted(by_label.items()))
    return f'<h2 id="testbeds">Testbeds</h2><table><tr>{head}</tr>{rows}</table>'


def _failures(records: list[dict[str, Any]], site: Site) -> str:
    e = html.escape
    failed = sorted((r for r in records if r["status"] != "ok"), key=lambda r: r["started_at"])
    if not failed:
        return '<h2 id="failures">Failures</h2><p>None: every run finished ok.</p>'
    rows = "".join(
        f'<tr><td>{e(r["study"])}</td><td>{e(r["run_id"])}</td>'
        f'<td class="failed">{e((r["error"] or {}).get("type", ""))}: '
        f'{e((r["error"] or {}).get("message", ""))}</td><td>{site.links(r)}</td></tr>'
        for r in failed)
    return (f'<h2 id="failures">Failures</h2><p>{len(failed)} run(s) failed; their numbers '
            f'are used nowhere.</p><table><tr><th>study</th><th>run</th><th>error</th>'
            f'<th>see</th></tr>{rows}</table>')


def _varying(records: list[dict[str, Any]]) -> list[str]:
    """The parameters that differ between a study's runs: the columns worth showing."""
    names = sorted({k for r in records for k in r["params"]})
    return [n for n in names if len({repr(r["params"].get(n)) for r in records}) > 1]


def _study_table(study: str, records: list[dict[str, Any]], site: Site,
                 beds: dict[str, landing.Testbed]) -> str:
    e = html.escape
    cols = _varying(records)
    metric_name = landing.headline_metric(records[0])[0]
    several = len({beds[r["run_id"]].label for r in records}) > 1
    sets = len({r.get("label") for r in records}) > 1  # history kept: say which set a run is in
    names = ["run", "status", *["set"] * sets, *cols, metric_name,
             *(["testbed"] if several else []), "took", "finished", "error"]
    head = "".join(f"<th>{e(c)}</th>" for c in names)
    body = []
    for rec in sorted(records, key=lambda r: r["started_at"]):
        run = rec["run_id"]
        link = e(run)
        if run in site.pages:
            link = f'<a href="{_rel(site.report_dir, site.pages[run])}">{link}</a>'
        link += f' <span class="src">(<a href="{_rel(site.report_dir, site.records[run])}">record</a>)</span>'
        took = pages.duration_s(rec)
        cells = [link, f'<span class="{e(rec["status"])}">{e(rec["status"])}</span>'
                 + _busy(rec.get("host_load"))]
        cells += [e(str(rec.get("label")))] * sets
        cells += [e(str(rec["params"].get(c))) for c in cols]
        cells += [e(landing.headline_metric(rec)[1])]
        cells += [e(beds[run].label)] if several else []
        cells += [f"{took:.0f} s" if took is not None else "",
                  rec["finished_at"][:19].replace("T", " "),
                  e((rec["error"] or {}).get("message", ""))]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    ok = sum(r["status"] == "ok" for r in records)
    names = ", ".join(sorted({study_name(r["notebook"]) for r in records}))
    return (f'<h3 id="runs-{e(study)}">{e(study)}</h3><p>Study <code>{e(names)}</code>. '
            f"{len(records)} runs: {ok} ok, {len(records) - ok} failed.</p>"
            f"<table><tr>{head}</tr>{''.join(body)}</table>")


def _busy(host_load: dict[str, Any] | None) -> str:
    """A flag beside the status of a run that started on a busy host."""
    said = hostload.describe(host_load)
    return f' <span class="busy">({html.escape(said)})</span>' if said else ""


def study_name(notebook: str) -> str:
    """The study a record belongs to, from its notebook (`10_single_device_io.ipynb` is
    single_device_io; `benchlib io (CLI)` is the CLI's run of the same study)."""
    cli = {"benchlib io (CLI)": "single_device_io", "benchlib allreduce (CLI)": "allreduce"}
    if notebook in cli:
        return cli[notebook]
    stem = notebook.removesuffix(".ipynb")
    head, _, rest = stem.partition("_")
    return rest if head.isdigit() and rest else stem


def _analysis_link(executed: Path, error: dict[str, Any] | None, report_dir: Path) -> str:
    """A failed analysis goes to analysis-failed.html: the last good analysis.html, if
    any, is never replaced by a broken one."""
    good = report_dir / "analysis.html"
    pages.write_css(report_dir)
    if error is None:
        pages.convert(executed, good, report_dir, pages.analysis_header(report_dir, good),
                      "Analysis across studies · benchlib report")
        return ('<h2 id="analysis">Analysis</h2><p><a href="analysis.html">Conclusions and '
                "figures across all studies</a>, computed from the records.</p>")
    bad = report_dir / "analysis-failed.html"
    header = pages.analysis_header(report_dir, bad, f"This analysis failed: {error['message']}")
    failed = (f' (<a href="{bad.name}">the failed run</a>)' if executed.exists() and pages.convert(
        executed, bad, report_dir, header, "Failed analysis · benchlib report") else "")
    kept = (f' The last analysis that ran through is kept: <a href="{good.name}">{good.name}</a>.'
            if good.exists() else "")
    return (f'<h2 id="analysis">Analysis</h2><p><span class="failed">analysis failed: '
            f'{html.escape(error["message"])}</span>{failed}.{kept}</p>')


def _compare_link(outputs: Path, report_dir: Path) -> tuple[str, dict[str, Any] | None]:
    """With two or more result sets sharing a row: notebook 95 on the newest two, as
    compare.html. Returns the index's paragraph and the notebook's error, if any."""
    from benchlib.workbook import compare_match

    pair = compare_match.default_pair(outputs / "results")
    if pair is None:
        return "", None
    executed = outputs / "runs" / "compare" / COMPARE_NOTEBOOK
    error = sweep.execute(paths.notebooks_dir() / COMPARE_NOTEBOOK, executed,
                          {"results_dir": str(outputs / "results")},
                          {"BENCHLIB_OUTPUTS": str(outputs)})
    what = f"{html.escape(pair[1])} against {html.escape(pair[0])}"
    if error is None:
        page = report_dir / "compare.html"
        pages.convert(executed, page, report_dir,
                      pages.analysis_header(report_dir, page, name="comparison"),
                      f"{pair[1]} against {pair[0]} · benchlib report")
        return (f'<h2 id="compared">Compared</h2><p><a href="compare.html">{what}</a>: what got '
                "slower or faster between the two newest result sets, and what changed</p>"), None
    return (f'<h2 id="compared">Compared</h2><p><span class="failed">comparing {what} failed: '
            f'{html.escape(error["message"])}</span></p>'), error


def _analysis_sections(report_dir: Path) -> list[tuple[str, str]]:
    page = report_dir / "analysis.html"
    return pages.sections(page.read_text(errors="replace")) if page.exists() else []


def build(outputs: Path, analysis: bool = True, zip_site: bool = False) -> Path:
    """Run the analysis (unless told not to), publish every run and record, write
    index.html; with `zip_site`, also outputs/benchlib-report.zip."""
    report_dir = outputs / "report"
    pages.write_css(report_dir)
    parts = ['<h1>benchlib report</h1>']
    error = compared = None
    analysis_part = ""
    if analysis:
        executed, error = run_analysis(outputs)
        analysis_part = _analysis_link(executed, error, report_dir)
        link, compared = _compare_link(outputs, report_dir)
        analysis_part += link
    sections = _analysis_sections(report_dir)
    records = results.read_records(outputs / "results")
    beds = landing.testbeds(records)
    site = publish_runs(records, outputs, report_dir, beds, sections)
    if not records:
        parts.append("<p>No runs yet: run a sweep, e.g. <code>python -m benchlib sweep "
                     "params/smoke_cpu.yaml</code>.</p>")
        parts.append(analysis_part)
    else:
        parts.append(_lede(records, beds))
        items = "".join(_finding(f, site, sections, error is None)
                        for f in landing.findings(records))
        parts.append(f'<h2 id="findings">Findings</h2><ul class="findings">{items}</ul>')
        parts += [analysis_part, _testbeds(records, beds), _failures(records, site),
                  '<h2 id="runs">Runs</h2><p>Per study, the parameters that vary between its '
                  "runs and each run's headline figure.</p>"]
        by_study: dict[str, list[dict[str, Any]]] = {}
        for rec in records:
            by_study.setdefault(rec["study"], []).append(rec)
        for study in sorted(by_study):
            parts.append(_study_table(study, by_study[study], site, beds))
    page = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>benchlib report</title><style>{STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
    index = atomic.write_text(report_dir / "index.html", page)
    if zip_site:
        archive(report_dir, outputs / ZIP_NAME)
    if error is not None:
        print(f"benchlib report: analysis failed: {error['type']}: {error['message']} "
              f"(see {executed})", file=sys.stderr)
        raise BenchlibError(f"report written to {index}, but the analysis notebook failed")
    if compared is not None:
        raise BenchlibError(f"report written to {index}, but the compare notebook failed: "
                            f"{compared['type']}: {compared['message']} (see "
                            f"{outputs / 'runs' / 'compare' / COMPARE_NOTEBOOK})")
    return index


def archive(report_dir: Path, target: Path) -> Path:
    """The report folder as one zip (entries under benchlib-report/), written atomically;
    temporary files (names starting with a dot) are left out."""
    with atomic.replacing(target, suffix=".zip") as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(report_dir.rglob("*")):
                rel = path.relative_to(report_dir)
                if path.is_file() and not any(p.startswith(".") for p in rel.parts):
                    zf.write(path, f"benchlib-report/{rel.as_posix()}")
    return target


def size_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
