"""The report's index.html, part by part: the lede, one finding per study (its figures
linked to the page and record of the run they came from, which `Site` locates), the
testbeds, the failures and each study's table of runs, and the page's style.
benchlib.report.publish puts the parts together and publishes the runs they link to.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from benchlib.analysis.claims import Claim, Figure
from benchlib.core import hostload
from benchlib.diagnose import rules
from benchlib.report import landing, pages

# A run table may reach the window's right edge (`.wide`), past the text's 72em: its
# columns keep their words whole (a word breaks only when longer than 28em), run ids stay
# on one line, and a header breaks at its underscores; past the window it scrolls.
STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222;
line-height:1.45;padding:0 1em}table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px
solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em;vertical-align:top}th{background:#f3f3f3}
.ok{color:#17632a}.failed{color:#a31515;font-weight:bold}code{font-size:.85em}a{color:#0b57a4}
.lede{font-size:1.05em}.findings{list-style:none;padding:0}.findings>li{margin:0 0 1.1em;
padding:.5em .8em;border-left:4px solid #0b57a4;background:#f7f9fc}.findings li.none{border-color:#a31515}
.question{color:#444;font-style:italic}.headline{font-size:1.05em;margin:.25em 0}
.src{font-size:.8em;color:#555;white-space:nowrap}.also{font-size:.9em;margin:.2em 0 .3em;
padding-left:1.2em}.also li{margin:.1em 0}
.meta{font-size:.85em;color:#555}.caveat{font-size:.85em;color:#6b4e00}h3{margin-top:1.6em}
.findings>li::after{content:"";display:table;clear:both}.thumb{float:right;margin:0 0 .4em 1em}
.thumb img{width:15em;max-width:35vw;border:1px solid #ccc;background:#fff}
.wide{overflow-x:auto;width:calc(50vw + 50% - 1.5em);margin:.5em 0 1.5em}.wide table{margin:0}
.wide td,.wide th{padding:.25em .4em;font-size:.85em}td{overflow-wrap:break-word;max-width:28em}
.id,.nowrap,.busy{white-space:nowrap}.busy{font-size:.8em;color:#8a5a00}"""


def _rel(report_dir: Path, target: Path) -> str:
    return target.relative_to(report_dir).as_posix()


class Site:
    """Where each run's page and record are in the report (paths under report_dir)."""

    def __init__(self, report_dir: Path, outputs: Path):
        self.report_dir, self.outputs = report_dir, outputs
        self.pages: dict[str, Path] = {}
        self.records: dict[str, Path] = {}

    def links(self, run: str, role: str = "") -> str:
        """"notebook, record" links of one run (its id), for a figure's sources."""
        out = []
        if run in self.pages:
            out.append(f'<a href="{_rel(self.report_dir, self.pages[run])}">notebook</a>')
        out.append(f'<a href="{_rel(self.report_dir, self.records[run])}">record</a>')
        return (f"{role}: " if role else "") + ", ".join(out)


def _figure(fig: Figure, site: Site) -> str:
    e = html.escape
    first = fig.sources[0][1] if fig.sources else None
    value = e(fig.value)
    if first is not None and first in site.pages:
        value = f'<a href="{_rel(site.report_dir, site.pages[first])}">{value}</a>'
    extra = [f"p10-p90 {e(fig.spread[0])}-{e(fig.spread[1])}"] if fig.spread else []
    extra += [e(fig.n)] if fig.n else []
    text = f"<strong>{value}</strong>" + (f" {e(fig.what)}" if fig.what else "") + \
        (f" ({', '.join(extra)})" if extra else "")
    sources = "; ".join(site.links(run, role) for role, run in fig.sources)
    return text + (f' <span class="src">[{sources}]</span>' if sources else "")


def _claim(claim: Claim, site: Site) -> str:
    out = html.escape(claim.subject)
    if claim.figure:
        out += ": " + _figure(claim.figure, site)
    return out + (f"; {html.escape(claim.note)}" if claim.note else "")


def finding(f: landing.Finding, site: Site, analysis_sections: list[tuple[str, str]],
            analysis_ok: bool, thumb: str | None = None) -> str:
    """One finding: the study and its question, the headline claim, the others, the
    caveat, where it ran and links; its figure small beside it (`thumb`, a file under the
    report), opening full size on click."""
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
                     f'{e(err.get("message", ""))}; {site.links(first["run_id"])}).</div>')
    if f.caveat:
        lines.append(f'<div class="caveat">{e(f.caveat)}</div>')
    meta = [f'testbed <a href="#testbed-{e(f.testbed.label)}">{e(f.testbed.label)}</a>'
            if f.testbed else "", e(f.status)]
    if f.failed and f.claims:
        meta[-1] = f'<a href="#failures">{meta[-1]}</a>'
    meta.append(f'<a href="#runs-{e(f.study)}">its runs</a>')
    section = pages.section_for(f.study, analysis_sections)
    if section and analysis_ok:
        meta.append(f'<a href="analysis.html#{e(section[0])}">analysis: {e(section[1])}</a>')
    lines.append(f'<div class="meta">{" · ".join(m for m in meta if m)}</div>')
    picture = (f'<a class="thumb" href="{e(thumb)}" title="{e(f.study)}: full size">'
               f'<img src="{e(thumb)}" alt="{e(f.study)}: its main figure" loading="lazy"></a>'
               if thumb else "")
    return f'<li class="{"none" if not f.claims else "some"}">{picture}{"".join(lines)}</li>'


def lede(records: list[dict[str, Any]], beds: dict[str, landing.Testbed]) -> str:
    ok = sum(r["status"] == "ok" for r in records)
    n_studies = len({r["study"] for r in records})
    labels = len({b.label for b in beds.values()})
    first = min(r["started_at"] for r in records)[:16].replace("T", " ")
    last = max(r["finished_at"] for r in records)[:16].replace("T", " ")
    sets = sorted({str(r.get("label")) for r in records})
    in_sets = (f" in result set {html.escape(sets[0])}" if len(sets) == 1 else
               f" in {len(sets)} result sets" if sets else "")
    return (f'<p class="lede">{landing.count(len(records), "run")} in '
            f'{landing.count(n_studies, "study", "studies")} ({ok} ok, {len(records) - ok} '
            f'failed) on {landing.count(labels, "testbed")}{in_sets}, between {first} and '
            f"{last} UTC. Each line answers one study's question with its headline figure "
            "(the newest ok run of each row), its spread (p10-p90) and n; every figure links "
            "to the executed notebook and the record it came from.</p>")


def testbeds_table(records: list[dict[str, Any]], beds: dict[str, landing.Testbed]) -> str:
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
    return f'<h2 id="testbeds">Testbeds</h2><div class="wide"><table><tr>{head}</tr>{rows}</table></div>'


def failures_table(records: list[dict[str, Any]], site: Site) -> str:
    e = html.escape
    failed = sorted((r for r in records if r["status"] != "ok"), key=lambda r: r["started_at"])
    if not failed:
        return '<h2 id="failures">Failures</h2><p>None: every run finished ok.</p>'
    rows = "".join(
        f'<tr><td>{e(r["study"])}</td><td>{e(r["run_id"])}</td>'
        f'<td class="failed">{e((r["error"] or {}).get("type", ""))}: '
        f'{e((r["error"] or {}).get("message", ""))}</td><td>{site.links(r["run_id"])}</td></tr>'
        for r in failed)
    return (f'<h2 id="failures">Failures</h2><p>{landing.count(len(failed), "run")} failed; '
            f'their numbers are used nowhere.</p><table><tr><th>study</th><th>run</th><th>error</th>'
            f'<th>see</th></tr>{rows}</table>')


def study_table(study: str, records: list[dict[str, Any]], site: Site,
                 beds: dict[str, landing.Testbed]) -> str:
    e = html.escape
    cols = landing.varying_params(records)  # the columns worth showing
    metric_name = landing.headline_metric(records[0])[0]
    several = len({beds[r["run_id"]].label for r in records}) > 1
    sets = len({r.get("label") for r in records}) > 1  # history kept: say which set a run is in
    verdicts = {r["run_id"]: rules.column(r) for r in records}  # what holds it back
    judged = any(verdicts.values())
    errors = any(r["error"] for r in records)
    names = ["run", "status", *["set"] * sets, *cols, metric_name,
             *(["held back by"] if judged else []),
             *(["testbed"] if several else []), "took", "finished", *(["error"] * errors)]
    head = "".join(f"<th>{'_<wbr>'.join(map(e, c.split('_')))}</th>" for c in names)
    body = []
    for rec in sorted(records, key=lambda r: r["started_at"]):
        run = rec["run_id"]
        link = f'<span class="id">{e(run)}</span>'
        if run in site.pages:
            link = f'<a href="{_rel(site.report_dir, site.pages[run])}">{link}</a>'
        link += f' <span class="src">(<a href="{_rel(site.report_dir, site.records[run])}">record</a>)</span>'
        took = pages.duration_s(rec)
        cells = [link, f'<span class="{e(rec["status"])}">{e(rec["status"])}</span>'
                 + _busy(rec.get("host_load"))]
        cells += [_words(rec.get("label"))] * sets
        cells += [_words(rec["params"].get(c)) for c in cols]
        cells += [f'<span class="nowrap">{e(landing.headline_metric(rec)[1])}</span>']
        cells += [_words(verdicts[run])] if judged else []
        cells += [e(beds[run].label)] if several else []
        cells += [f'<span class="nowrap">{took:.0f} s</span>' if took is not None else "",
                  f'<span class="nowrap">{rec["finished_at"][:16].replace("T", " ")}</span>']
        cells += [e((rec["error"] or {}).get("message", ""))] * errors
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    ok = sum(r["status"] == "ok" for r in records)
    names = ", ".join(sorted({r["study"] for r in records}))
    return (f'<h3 id="runs-{e(study)}">{e(study)}</h3><p>Study <code>{e(names)}</code>. '
            f"{landing.count(len(records), 'run')}: {ok} ok, {len(records) - ok} failed.</p>"
            f'<div class="wide"><table><tr>{head}</tr>{"".join(body)}</table></div>')


def _words(value: Any) -> str:
    """A run table's cell text, escaped, each hyphenated word kept on one line (a line may
    break between words, never inside "host-contended" or "timm:resnet-50")."""
    return " ".join(f'<span class="nowrap">{w}</span>' if "-" in w else w
                    for w in html.escape(str(value)).split(" "))


def _busy(host_load: dict[str, Any] | None) -> str:
    """A flag beside the status of a run that started on a busy host: "busy host", its
    figures in the title (and on the run's page)."""
    said = hostload.describe(host_load)
    return f' <span class="busy" title="{html.escape(said)}">busy host</span>' if said else ""


THUMBS = "figures"  # report/figures/<study>-<testbed>.png: each finding's main figure
