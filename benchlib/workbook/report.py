"""The published report: the analysis notebook first, then every run grouped by study.

    outputs/report/index.html
    outputs/report/analysis.html                 notebooks/90_analysis.ipynb, executed fresh
    outputs/report/<study>/<run_id>.html         each run's executed notebook, code hidden

HTML comes from nbconvert with `exclude_input=True` (what `--no-input` does; papermill's
report mode is ignored by nbconvert). Pages already newer than their notebook are kept.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import Any

from benchlib import atomic, paths
from benchlib.errors import BenchlibError
from benchlib.workbook import results, sweep

ANALYSIS_NOTEBOOK = "90_analysis.ipynb"


def run_analysis(outputs: Path) -> tuple[Path, dict[str, Any] | None]:
    """Execute the analysis over every record; returns (executed notebook, error or None)."""
    executed = outputs / "runs" / "analysis" / ANALYSIS_NOTEBOOK
    error = sweep.execute(paths.notebooks_dir() / ANALYSIS_NOTEBOOK, executed,
                          {"results_dir": str(outputs / "results")},
                          {"BENCHLIB_OUTPUTS": str(outputs)})
    return executed, error


def to_html(notebook: Path, page: Path) -> Path:
    """One executed notebook as HTML without its code; skipped when the page is newer."""
    if page.exists() and page.stat().st_mtime >= notebook.stat().st_mtime:
        return page
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(exclude_input=True).from_notebook_node(nbformat.read(notebook, 4))
    return atomic.write_text(page, body)


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:left;font-size:.9em}th{background:#f3f3f3}.ok{color:#17632a}.failed{color:#a31515;
font-weight:bold}code{font-size:.85em}"""


def _varying(records: list[dict[str, Any]]) -> list[str]:
    """The parameters that differ between a study's runs: the columns worth showing."""
    names = sorted({k for r in records for k in r["params"]})
    return [n for n in names if len({repr(r["params"].get(n)) for r in records}) > 1]


def _study_table(study: str, records: list[dict[str, Any]], report_dir: Path,
                 outputs: Path) -> str:
    cols = _varying(records)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["run", "status", *cols, "finished", "error"])
    body = []
    for rec in sorted(records, key=lambda r: r["started_at"]):
        link = html.escape(rec["run_id"])
        executed = outputs / rec["executed_notebook"] if rec["executed_notebook"] else None
        if executed and executed.exists():
            page = to_html(executed, report_dir / study / f"{rec['run_id']}.html")
            link = f'<a href="{page.relative_to(report_dir)}">{link}</a>'
        cells = [link, f'<span class="{rec["status"]}">{rec["status"]}</span>']
        cells += [html.escape(str(rec["params"].get(c))) for c in cols]
        cells += [rec["finished_at"][:19].replace("T", " "),
                  html.escape((rec["error"] or {}).get("message", ""))]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    ok = sum(r["status"] == "ok" for r in records)
    names = ", ".join(sorted({study_name(r["notebook"]) for r in records}))
    return (f"<h2>{html.escape(study)}</h2><p>Study <code>{html.escape(names)}</code>. "
            f"{len(records)} runs: {ok} ok, {len(records) - ok} failed.</p>"
            f"<table><tr>{head}</tr>{''.join(body)}</table>")


def study_name(notebook: str) -> str:
    """The study a record belongs to, from its notebook (`10_single_device_io.ipynb` is
    single_device_io; `benchlib io (CLI)` is the CLI's run of the same study)."""
    cli = {"benchlib io (CLI)": "single_device_io", "benchlib allreduce (CLI)": "allreduce"}
    if notebook in cli:
        return cli[notebook]
    stem = notebook.removesuffix(".ipynb")
    head, _, rest = stem.partition("_")
    return rest if head.isdigit() and rest else stem


def build(outputs: Path, analysis: bool = True) -> Path:
    """Run the analysis (unless told not to), convert every run, write index.html."""
    report_dir = outputs / "report"
    parts = ["<h1>benchlib report</h1>"]
    error = None
    if analysis:
        executed, error = run_analysis(outputs)
        page = to_html(executed, report_dir / "analysis.html")
        state = ("" if error is None else
                 f' <span class="failed">analysis failed: {html.escape(error["message"])}</span>')
        parts.append(f'<h2>Analysis</h2><p><a href="{page.name}">Conclusions and figures '
                     f"across all studies</a>{state}</p>")
    by_study: dict[str, list[dict[str, Any]]] = {}
    for file in results.record_files(outputs / "results"):
        rec = results.read_record(file)
        by_study.setdefault(rec["study"], []).append(rec)
    if not by_study:
        parts.append("<p>No runs yet: run a sweep, e.g. <code>python -m benchlib sweep "
                     "params/smoke_cpu.yaml</code>.</p>")
    for study in sorted(by_study):
        parts.append(_study_table(study, by_study[study], report_dir, outputs))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>benchlib report</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
    index = atomic.write_text(report_dir / "index.html", page)
    if error is not None:
        print(f"benchlib report: analysis failed: {error['type']}: {error['message']} "
              f"(see {executed})", file=sys.stderr)
        raise BenchlibError(f"report written to {index}, but the analysis notebook failed")
    return index
