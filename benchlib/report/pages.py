"""The report's notebook pages: nbconvert through benchlib/report/template, which keeps
JupyterLab's look and drops everything it would fetch from a network, plus the header
benchlib writes above a page's cells: for a run, what ran (parameters, the injected ones
marked, status, testbed, duration) and where to read next; for the analysis, a table of
contents.

Every link is relative to the page, so the site works from file:// and from any static
server, copied or zipped anywhere.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import html
import re
from pathlib import Path
from typing import Any

from benchlib import atomic
from benchlib.diagnose import rules
from benchlib.errors import BenchlibError
from benchlib.report.landing import Record, Testbed, headline_metric

TEMPLATE_DIR = Path(__file__).with_name("template")
CSS_NAME = "static/notebook.css"  # one shared copy of JupyterLab's CSS, under the report
TOC_MARK = "<!--benchlib:toc-->"
PAGE_META = "benchlib-page"  # a page keeps a hash of what made it; same hash: not redone


@functools.lru_cache(maxsize=1)
def _exporter():
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name=TEMPLATE_DIR.name,
                        extra_template_basedirs=[str(TEMPLATE_DIR.parent)],
                        exclude_input=True, exclude_input_prompt=True,
                        exclude_output_prompt=True)


def _lab_static() -> Path:
    """JupyterLab's template CSS that nbconvert would inline into every page."""
    for folder in _exporter().template_paths:
        if (Path(folder) / "static" / "index.css").exists() and Path(folder).name == "lab":
            return Path(folder) / "static"
    raise BenchlibError("nbconvert's lab template (static/index.css) was not found: "
                        "pip install 'nbconvert>=7'")


def _template_version() -> str:
    digest = hashlib.sha256()
    for path in sorted(TEMPLATE_DIR.iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    import nbconvert

    return digest.hexdigest()[:12] + "-" + nbconvert.__version__


def write_css(report_dir: Path) -> Path:
    """report/static/notebook.css: JupyterLab's light theme and benchlib's additions,
    written once and linked by every notebook page (inlined it is 250 kB a page)."""
    static = _lab_static()
    css = "\n".join([(static / "index.css").read_text(), (static / "theme-light.css").read_text(),
                     (TEMPLATE_DIR / "report.css").read_text()])
    target = report_dir / CSS_NAME
    if not target.exists() or target.read_text() != css:
        atomic.write_text(target, css)
    return target


def _href(page: Path, target: Path, report_dir: Path) -> str:
    """`target` (a path under report_dir) relative to the folder of `page`."""
    depth = len(page.relative_to(report_dir).parts) - 1
    return "../" * depth + target.relative_to(report_dir).as_posix()


def convert(notebook: Path, page: Path, report_dir: Path, header: str,
            title: str) -> Path:
    """`notebook` as `page`, without code or prompts, with `header` above its cells.
    Kept as it is when it is newer than the notebook and was made from the same header
    and template."""
    import nbformat

    stamp = hashlib.sha256((header + title + _template_version()).encode()).hexdigest()[:16]
    meta = f'<meta name="{PAGE_META}" content="{stamp}">'
    if page.exists() and page.stat().st_mtime >= notebook.stat().st_mtime \
            and meta in page.read_text(errors="replace"):
        return page
    nb = nbformat.read(notebook, 4)
    nb.metadata["title"] = title
    css = report_dir / CSS_NAME
    body, _ = _exporter().from_notebook_node(
        nb, resources={"benchlib": {"css_href": _href(page, css, report_dir), "header": header}})
    body = body.replace("<head>", "<head>\n" + meta, 1)
    if TOC_MARK in body:
        body = body.replace(TOC_MARK, toc(body), 1)
    return atomic.write_text(page, body)


# ---------------------------------------------------------------- the analysis page

H2 = re.compile(r'<h2 id="([^"]+)"[^>]*>(.*?)</h2>', re.S)


def _text(fragment: str) -> str:
    fragment = re.sub(r'<a class="anchor-link".*?</a>', "", fragment, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def sections(page_html: str) -> list[tuple[str, str]]:
    """(id, heading) of each h2 of a converted notebook, in order."""
    return [(anchor, _text(inner)) for anchor, inner in H2.findall(page_html)]


def toc(page_html: str) -> str:
    items = "".join(f'<li><a href="#{html.escape(a)}">{html.escape(t)}</a></li>'
                    for a, t in sections(page_html))
    return f'<nav class="benchlib-toc"><h2>Contents</h2><ol>{items}</ol></nav>' if items else ""


def analysis_header(report_dir: Path, page: Path, failed: str = "",
                    name: str = "analysis") -> str:
    """Above a page across runs (the analysis, the comparison): the way back to the index,
    what failed (if it did), and the page's table of contents."""
    back = _href(page, report_dir / "index.html", report_dir)
    warning = f'<p class="benchlib-failed">{html.escape(failed)}</p>' if failed else ""
    return (f'<header class="benchlib-header"><nav class="benchlib-crumbs">'
            f'<a href="{back}">benchlib report</a> &rsaquo; {html.escape(name)}</nav>{warning}'
            f"{TOC_MARK}</header>")


def section_for(study: str, analysis_sections: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(anchor, heading) of the study's section of the analysis page (its heading starts
    with "<study>: "; the anchor is the one benchlib.analysis.findings puts above it), or
    None where the analysis has no such section."""
    for _, heading in analysis_sections:
        if heading.startswith(f"{study}: "):
            return f"study-{study}", heading
    return None


# ---------------------------------------------------------------- a run's page

def injected(notebook: Path) -> set[str]:
    """The parameters a run was given other than its notebook's defaults: the names
    papermill injected (the sweep injects the row's whole config) whose value differs
    from the one the notebook's own parameters cell assigns."""
    import nbformat

    def assigned(source: str) -> dict[str, str]:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return {}
        found = {}
        for node in tree.body:  # `x = 1` as papermill injects it, `x: int = 1` as we write it
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
            found.update({t.id: ast.dump(node.value) for t in targets if isinstance(t, ast.Name)})
        return found

    cells = nbformat.read(notebook, 4).cells
    tagged = {tag: c.source for c in cells for tag in c.metadata.get("tags", [])
              if tag in ("parameters", "injected-parameters")}
    given, defaults = assigned(tagged.get("injected-parameters", "")), \
        assigned(tagged.get("parameters", ""))
    return {name for name, value in given.items() if defaults.get(name) != value}


def duration_s(rec: Record) -> float | None:
    from datetime import datetime

    try:
        return (datetime.fromisoformat(rec["finished_at"])
                - datetime.fromisoformat(rec["started_at"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def _value(value: Any) -> str:
    return html.escape(repr(value) if isinstance(value, str) else str(value))


def run_header(rec: Record, bed: Testbed, page: Path, report_dir: Path, set_names: set[str],
               record_page: Path, section: tuple[str, str] | None) -> str:
    """What ran, above the notebook's outputs: study and run, status (and error),
    testbed, when and how long, the parameters with the injected ones marked, the links
    to the record and to the study's section of the analysis."""
    e = html.escape
    index = _href(page, report_dir / "index.html", report_dir)
    study = rec["study"]
    crumbs = (f'<a href="{index}">benchlib report</a> &rsaquo; '
              f'<a href="{index}#runs-{e(study)}">{e(study)}</a> &rsaquo; run {e(rec["run_id"])}')
    if section:
        analysis = _href(page, report_dir / "analysis.html", report_dir)
        read_next = (f'<p class="benchlib-next">Read next: <a href="{analysis}#'
                     f'{e(section[0])}">{e(section[1])}</a>, in the analysis across runs.</p>')
    else:
        read_next = ""
    status = f'<span class="{e(rec["status"])}">{e(rec["status"])}</span>'
    if rec.get("error"):
        err = rec["error"]
        status += f': {e(err.get("type", ""))}: {e(err.get("message", ""))}'
    took = duration_s(rec)
    name, value = headline_metric(rec)
    rows = [
        ("status", status),
        ("testbed", f'<a href="{index}#testbed-{e(bed.label)}">{e(bed.label)}</a>: '
                    + e("; ".join(f"{k} {v}" for k, v in bed.describe()))),
        ("ran", f'{e(rec["started_at"][:19].replace("T", " "))} UTC'
                + (f", {took:.1f} s" if took is not None else "")
                + f' ({e((rec.get("executor") or {}).get("name", "local"))})'),
        ("notebook", e(rec["notebook"])),
        ("record", f'<a href="{_href(page, record_page, report_dir)}">'
                   f'{e(record_page.name)}</a> (parameters, environment, metrics)'),
    ]
    if value:
        rows.insert(1, (e(name), e(value)))
    if rules.column(rec):  # what holds it back, its evidence and the change that helps
        found = rules.diagnose(rec)
        rows.insert(2, ("held back by", f"<strong>{e(found.bottleneck)}</strong>: "
                        + e("; ".join(found.evidence)) + (f"<br>{e(found.advice)}" if found.advice
                                                          else "")))
    facts = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    params = "".join(
        f'<tr class="{"set" if k in set_names else "default"}"><th>{e(k)}</th>'
        f'<td>{_value(v)}</td><td>{"injected" if k in set_names else "default"}</td></tr>'
        for k, v in rec["params"].items())
    return (f'<header class="benchlib-header"><nav class="benchlib-crumbs">{crumbs}</nav>'
            f'<h1 class="benchlib-title">{e(study)} &middot; run {e(rec["run_id"])}</h1>'
            f'{read_next}<table class="benchlib-facts">{facts}</table>'
            f'<details class="benchlib-params" open><summary>Parameters '
            f'({len(set_names & set(rec["params"]))} injected for this run, marked; the rest '
            f'are the notebook\'s defaults)</summary><table>{params}</table></details>'
            f'<p class="benchlib-outputs-follow">The notebook\'s outputs follow; its code is '
            f'hidden.</p></header>')
