"""The published report: findings first, then the analysis, the testbeds, the failures
and every run, as a static site that works from file:// with no network.

    outputs/report/index.html                    findings per study, testbeds, failures, runs
    outputs/report/analysis.html                 notebooks/90_analysis.ipynb, executed fresh
    outputs/report/<table>/<run_id>.html         each run's executed notebook, code hidden
    outputs/report/records/<table>/<run_id>.json each run's record, as the sweep wrote it
    outputs/report/static/notebook.css           JupyterLab's CSS, shared by the pages
    outputs/report/compare.html                  notebook 95, when two result sets share a row
    outputs/benchlib-report.zip                  with --zip: the folder, to hand around

HTML comes from nbconvert with `exclude_input=True` (what `--no-input` does; papermill's
report mode is ignored by nbconvert), no prompts, and benchlib/report/template, which
drops the template's CDN scripts. Every link is relative. A page already made from the
same notebook, header and template is kept. The index's parts are made by
report/index.py, the notebook pages by report/pages.py.
"""

from __future__ import annotations

import html
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from benchlib import atomic, paths
from benchlib.errors import BenchlibError, UsageError
from benchlib.records import results
from benchlib.report import index, landing, pages
from benchlib.report.index import Site
from benchlib.runs import sweep

ANALYSIS_NOTEBOOK = "90_analysis.ipynb"
COMPARE_NOTEBOOK = "95_compare.ipynb"
ZIP_NAME = "benchlib-report.zip"
FAILED_ANALYSIS = "analysis-failed.html"  # in the folder while it is the newest; never zipped
OUTPUTS_HINT = "give --outputs (or BENCHLIB_OUTPUTS) a folder this user can write"


def _probe(folder: Path) -> str | None:
    """Why nothing can be written in `folder` (made if missing), or None when a file can:
    tried for real, since permission bits say nothing to root or of a read-only mount."""
    if folder.exists() and not folder.is_dir():
        return "it is a file, not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".benchlib-probe.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_writable(outputs: Path, zip_site: bool = False) -> None:
    """Refuse, before the analysis runs, a report folder (or zip) that cannot be written."""
    report_dir = outputs / "report"
    why = _probe(report_dir)
    if why is not None:
        raise UsageError(f"outputs: cannot write the report in {report_dir}: {why}; "
                         + OUTPUTS_HINT)
    if zip_site:
        target = outputs / ZIP_NAME
        if target.is_dir():
            raise UsageError(f"outputs: cannot write the zip {target}: it is a folder, not a "
                             "file; move it away or give --outputs (or BENCHLIB_OUTPUTS) another "
                             "folder")
        why = _probe(outputs)
        if why is not None:
            raise UsageError(f"outputs: cannot write the zip {target}: {why}; " + OUTPUTS_HINT)


def run_analysis(outputs: Path) -> tuple[Path, dict[str, Any] | None]:
    """Execute the analysis over every record; returns (executed notebook, error or None)."""
    executed = outputs / "runs" / "analysis" / ANALYSIS_NOTEBOOK
    error = sweep.execute(paths.notebooks_dir() / ANALYSIS_NOTEBOOK, executed,
                          {"results_dir": str(outputs / "results")},
                          {"BENCHLIB_OUTPUTS": str(outputs)})
    return executed, error


def publish_runs(records: list[dict[str, Any]], outputs: Path, report_dir: Path,
                 beds: dict[str, landing.Testbed], analysis_sections: list[tuple[str, str]]) -> Site:
    """Copy every record into the report and convert every executed notebook to its page,
    headed by what ran and a link to its study's section of the analysis."""
    site = Site(report_dir, outputs)
    for rec in records:
        src = results.record_path(outputs / "results", rec["table"], rec["run_id"])
        target = report_dir / "records" / rec["table"] / f"{rec['run_id']}.json"
        if not target.exists() or target.read_bytes() != src.read_bytes():
            atomic.write_bytes(target, src.read_bytes())
        site.records[rec["run_id"]] = target
        executed = outputs / rec["executed_notebook"] if rec["executed_notebook"] else None
        if executed and executed.exists():
            page = report_dir / rec["table"] / f"{rec['run_id']}.html"
            header = pages.run_header(rec, beds[rec["run_id"]], page, report_dir,
                                      pages.injected(executed), target,
                                      pages.section_for(rec["study"], analysis_sections))
            site.pages[rec["run_id"]] = pages.convert(
                executed, page, report_dir, header,
                f"{rec['table']} · run {rec['run_id']} · benchlib report")
    return site


def _analysis_link(executed: Path, error: dict[str, Any] | None, report_dir: Path) -> str:
    """A failed analysis goes to analysis-failed.html: the last good analysis.html, if
    any, is never replaced by a broken one; the next analysis that passes removes it."""
    good = report_dir / "analysis.html"
    bad = report_dir / FAILED_ANALYSIS
    pages.write_css(report_dir)
    if error is None:
        pages.convert(executed, good, report_dir, pages.analysis_header(report_dir, good),
                      "Analysis across studies · benchlib report")
        bad.unlink(missing_ok=True)
        return ('<h2 id="analysis">Analysis</h2><p><a href="analysis.html">Conclusions and '
                "figures across all studies</a>, computed from the records.</p>")
    header = pages.analysis_header(report_dir, bad, f"This analysis failed: {error['message']}")
    failed = (f' (<a href="{bad.name}">the failed run</a>)' if executed.exists() and pages.convert(
        executed, bad, report_dir, header, "Failed analysis · benchlib report") else "")
    kept = (f' The last analysis that ran through is kept: <a href="{good.name}">{good.name}</a>.'
            if good.exists() else "")
    return (f'<h2 id="analysis">Analysis</h2><p><span class="failed">analysis failed: '
            f'{html.escape(error["message"])}</span>{failed}.{kept}</p>')


def write_thumbnails(found: list[landing.Finding], records: list[dict[str, Any]],
                     beds: dict[str, landing.Testbed], report_dir: Path) -> dict[int, str]:
    """Each finding's figure, drawn by its study's figure function from the runs it sums up
    (benchlib.analysis.findings.figure), as figures/<study>-<testbed>.png; returns the
    file of each finding that has one (by its place in `found`). Figures no finding draws
    any more are removed; one that cannot be drawn is left out and said why, once."""
    from benchlib.analysis import findings as analysed
    from benchlib.analysis.sections import Records, compute
    from benchlib.config import studies

    folder = report_dir / index.THUMBS
    drawn: dict[int, str] = {}
    for i, f in enumerate(found):
        entry = studies.of_notebook_entry(f.notebook)
        if entry is None or not f.claims or f.testbed is None:
            continue
        mine = [r for r in records if r["study"] == f.study
                and beds[r["run_id"]].label == f.testbed.label]
        # every record beside them: the projection draws from the runs it projects, which
        # may be of another testbed (the kernel it ran in)
        part = compute(analysed.figure, entry, Records(records=mine, every=records))
        if part.error:
            print(f"benchlib report: no figure beside {f.study} ({f.testbed.label}): "
                  f"{part.error}", file=sys.stderr)
        for item in part.items:
            name = f"{f.study}-{f.testbed.label}.png"
            atomic.write_bytes(folder / name, _png(item))
            drawn[i] = f"{index.THUMBS}/{name}"
    for old in folder.glob("*.png"):
        if f"{index.THUMBS}/{old.name}" not in drawn.values():
            old.unlink()
    return drawn


def _png(item: Any) -> bytes:
    """A figure (matplotlib's, or a seaborn grid's) as PNG bytes, closed once drawn."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchlib.analysis.sections import figure_of

    fig = figure_of(item)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _compare_link(outputs: Path, report_dir: Path) -> tuple[str, dict[str, Any] | None]:
    """With two or more result sets sharing a row: notebook 95 on the newest two, as
    compare.html. Returns the index's paragraph and the notebook's error, if any."""
    from benchlib.compare import sets

    pair = sets.default_pair(outputs / "results")
    if pair is None:  # a comparison of sets that no longer share a row is not shown
        (report_dir / "compare.html").unlink(missing_ok=True)
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
    index.html; with `zip_site`, also outputs/benchlib-report.zip (not when the analysis
    failed: its index would link a page the zip leaves out)."""
    check_writable(outputs, zip_site)
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
        parts.append(index.lede(records, beds))
        found = landing.findings(records)
        thumbs = write_thumbnails(found, records, beds, report_dir)
        items = "".join(index.finding(f, site, sections, error is None, thumbs.get(i))
                        for i, f in enumerate(found))
        parts.append(f'<h2 id="findings">Findings</h2><ul class="findings">{items}</ul>')
        parts += [analysis_part, index.testbeds_table(records, beds),
                  index.failures_table(records, site),
                  '<h2 id="runs">Runs</h2><p>Per study, the parameters that vary between its '
                  "runs and each run's headline figure.</p>"]
        by_study: dict[str, list[dict[str, Any]]] = {}
        for rec in records:
            by_study.setdefault(rec["study"], []).append(rec)
        for study in sorted(by_study):
            parts.append(index.study_table(study, by_study[study], site, beds))
    page = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>benchlib report</title><style>{index.STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
    index_path = atomic.write_text(report_dir / "index.html", page)
    if zip_site and error is None:
        archive(report_dir, outputs / ZIP_NAME)
    if error is not None:
        print(f"benchlib report: analysis failed: {error['type']}: {error['message']} "
              f"(see {executed}){'; zip not written' if zip_site else ''}", file=sys.stderr)
        raise BenchlibError(f"report written to {index_path}, but the analysis notebook failed")
    if compared is not None:
        raise BenchlibError(f"report written to {index_path}, but the compare notebook failed: "
                            f"{compared['type']}: {compared['message']} (see "
                            f"{outputs / 'runs' / 'compare' / COMPARE_NOTEBOOK})")
    return index_path


def archive(report_dir: Path, target: Path) -> Path:
    """The report folder as one zip (entries under benchlib-report/), written atomically;
    temporary files (names starting with a dot) and a failed analysis are left out."""
    with atomic.replacing(target, suffix=".zip") as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(report_dir.rglob("*")):
                rel = path.relative_to(report_dir)
                if path.is_file() and not any(p.startswith(".") for p in rel.parts) \
                        and rel.as_posix() != FAILED_ANALYSIS:
                    zf.write(path, f"benchlib-report/{rel.as_posix()}")
    return target


def size_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
