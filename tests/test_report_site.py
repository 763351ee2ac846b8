"""The published site, built from real runs: a data-preparation run (a page with a
plot), a trivial run that succeeded and one that failed, and the analysis. Its links are
relative and resolve, nothing is fetched from a network, `report --zip` hands it around,
and headless chromium renders it from file:// offline, with screenshots under
outputs/screenshots/.
"""

from __future__ import annotations

import html
import re
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser import ROOT, broken_images, open_offline, screenshot
from conftest import TRIVIAL

from benchlib.cli import main
from benchlib.records import results
from benchlib.report import index, pages, publish

SCREENSHOTS = ROOT / "outputs" / "screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """outputs/ with three runs, two rows of a study of one's own (tests/toystudy, joined
    through BENCHLIB_STUDIES) swept, and the report built over them (analysis included).

    The data-preparation run prepares every data set (dataset left at its default, all,
    so its record names FashionMNIST's and MyDataSet's samples), CIFAR-10, the image
    folder and the token file at their smallest: no test reads their sizes. It and the failed trivial
    run are also what test_notebooks ran again for its own report (one launch of each
    serves both: the notebooks, the report and its analysis are the same)."""
    import os

    import toystudy

    root = tmp_path_factory.mktemp("site")
    outputs = root / "outputs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLIB_OUTPUTS", str(outputs))
        mp.setenv("BENCHLIB_STUDIES", "toystudy")  # the kernels and the analysis see it too
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
            str(ROOT / "tests"), os.environ.get("PYTHONPATH")])))
        table = root / "toys.yaml"
        table.write_text(f"name: toys\nnotebook: {toystudy.NOTEBOOK}\n"
                         "table:\n  - {toys: 4, box: large}\n  - {toys: 2}\n")
        assert main(["sweep", str(table)]) == 0
        assert main(["run", "00_data_prep", "-p", "path", str(root / "data"), "-p", "offline",
                     "true", "-p", "size", "200", "-p", "fashion_size", "300", "-p", "cifar_size", "10",
                     "-p", "imagefolder_size", "10", "-p", "tokenfile_size", "10", "--study",
                     "data_prep"]) == 0
        assert main(["run", str(TRIVIAL), "-p", "x", "21", "--study", "trivial"]) == 0
        assert main(["run", str(TRIVIAL), "-p", "fail", "true", "--study", "broken"]) == 1
        publish.build(outputs)
        yield outputs


class Refs(HTMLParser):
    """Every URL a page refers to, with the tag and attribute it is in; and its ids."""

    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id":
                self.ids.add(value)
            if name in ("href", "src", "action", "data", "poster") and value is not None:
                self.refs.append((tag, name, value))


def parse(page: Path) -> Refs:
    refs = Refs()
    refs.feed(page.read_text())
    return refs


def html_pages(report_dir: Path) -> list[Path]:
    return sorted(report_dir.rglob("*.html"))


def test_the_site_has_the_landing_page_analysis_run_pages_and_records(site):
    report_dir = site / "report"
    names = {p.relative_to(report_dir).as_posix() for p in report_dir.rglob("*") if p.is_file()}
    runs = results.read_records(site / "results")
    assert {"index.html", "analysis.html", pages.CSS_NAME} <= names
    for rec in runs:
        assert f"{rec['table']}/{rec['run_id']}.html" in names
        assert f"records/{rec['table']}/{rec['run_id']}.json" in names


def test_a_study_added_by_one_registry_entry_is_swept_analysed_and_on_the_landing_page(site):
    """tests/toystudy is one registry entry plus its modules and notebook, and no other
    change anywhere: its rows ran (the sweep checked them against its config), notebook
    90 gave it a section from its analysis module, and the landing page a finding with
    its headline and its figure."""
    toys = [r for r in results.read_records(site / "results") if r["table"] == "toys"]
    assert sorted((r["study"], r["status"], r["metrics"]["toys_fitted"]) for r in toys) == \
        [("toy", "ok", 2), ("toy", "ok", 8)]
    page = (site / "report" / "index.html").read_text()
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert "toy How many toys fit in the box? large box: 8 toys fitted" in text
    assert "small box: 2 toys fitted" in text
    assert re.search(r'<a class="thumb" href="figures/toy-T1\.png"', page)
    assert (site / "report" / "figures" / "toy-T1.png").read_bytes()[:4] == b"\x89PNG"
    analysis = (site / "report" / "analysis.html").read_text()
    assert 'id="study-toy"' in analysis and "toy: How many toys fit in the box? (notebook 60)" \
        in html.unescape(analysis)
    assert "The toy study&#39;s section, computed by its own module." in analysis or \
        "The toy study's section, computed by its own module." in analysis


def test_every_link_is_relative_and_resolves_to_a_file_and_anchor(site):
    report_dir = site / "report"
    checked = 0
    for page in html_pages(report_dir):
        for tag, attr, url in parse(page).refs:
            if url.startswith("data:"):
                assert tag == "img", f"{page.name}: a data: URL in <{tag} {attr}>"
                continue
            parts = urlsplit(url)
            assert not parts.scheme and not parts.netloc and not url.startswith("/"), \
                f"{page.relative_to(report_dir)}: <{tag} {attr}={url!r}> is not relative"
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file(), f"{page.relative_to(report_dir)}: {url} does not resolve"
            assert target.is_relative_to(report_dir.resolve()), f"{url} leaves the report"
            if parts.fragment:
                ids = parse(target).ids  # a browser tries the fragment as is, then decoded
                assert parts.fragment in ids or unquote(parts.fragment) in ids, \
                    f"{page.relative_to(report_dir)}: {url}: no such anchor"
            checked += 1
    assert checked > 20


def test_no_page_or_stylesheet_asks_a_network_for_anything(site):
    report_dir = site / "report"
    for page in html_pages(report_dir):
        text = page.read_text()
        assert not re.search(r"<script[^>]*\bsrc=", text), f"{page.name} loads a script"
        assert not re.search(r"https?://", text), \
            f"{page.name} names a web address: {re.search(r'.{60}https?://.{60}', text)}"
        for tag, _, url in parse(page).refs:
            assert not url.startswith(("http:", "https:", "//")), (page.name, tag, url)
    for css in report_dir.rglob("*.css"):
        assert not re.search(r"""(@import|url\()\s*['"]?(https?:)?//""", css.read_text()), css


def test_landing_page_leads_with_findings_then_testbeds_failures_and_runs(site):
    page = (site / "report" / "index.html").read_text()
    order = [page.index(f'<h2 id="{s}">') for s in
             ("findings", "analysis", "testbeds", "failures", "runs")]
    assert order == sorted(order)
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert "fashion-mnist: 350 samples, generated" in text
    assert "trivial Which data sets" not in text
    # tables trivial and broken ran the same notebook: one study, its failed run counted
    assert "trivial What does trivial.ipynb measure? 1 ok run; no headline figure is " \
           "defined for trivial.ipynb. testbed T1 · 1 of 2 runs ok, 1 failed" in text
    data_prep = next(r for r in results.read_records(site / "results") if r["study"] == "data_prep")
    figure = re.search(r'<strong><a href="([^"]+)">350</a></strong>', page)
    assert figure and figure.group(1) == f"data_prep/{data_prep['run_id']}.html"
    assert f'href="records/data_prep/{data_prep["run_id"]}.json">record</a>' in page
    assert '<a href="analysis.html#study-data_prep">analysis: data_prep: ' in page


def test_run_page_says_what_ran_before_the_outputs_and_links_to_the_analysis(site):
    rec = next(r for r in results.read_records(site / "results") if r["study"] == "data_prep")
    page = (site / "report" / "data_prep" / f"{rec['run_id']}.html").read_text()
    header = page[page.index('<header class="benchlib-header">'):page.index("</header>")]
    assert page.index("</header>") < page.index("00 · Data preparation")  # before the cells
    for name in ("size", "fashion_size", "cifar_size", "imagefolder_size", "tokenfile_size",
                 "offline", "path"):  # set by the run
        assert re.search(rf'<tr class="set"><th>{name}</th>', header), name
    assert re.search(r'<tr class="default"><th>seed</th><td>0</td>', header)
    assert "<tr class=\"default\"><th>dataset</th><td>'all'</td>" in header  # left at it
    assert '<span class="ok">ok</span>' in header and "testbed" in header
    assert re.search(r"UTC, \d+\.\d s \(local\)", header)
    assert 'href="../analysis.html#study-data_prep"' in header
    assert 'href="../records/data_prep/' in header and 'href="../index.html#runs-data_prep"' in header
    assert not re.search(r"(In|Out)\s*(&nbsp;)?\[\d*\]:", page)  # no prompts
    assert "jp-InputPrompt" not in page and "jp-OutputPrompt" not in page
    assert "data.prepare(cfg)" not in page  # code hidden


def test_data_prep_and_analysis_notebooks_run_and_the_report_publishes(site):
    data_dir = site.parent / "data"
    [rec] = [r for r in results.load_results(site / "results").to_dict("records")
             if r["study"] == "data_prep"]
    assert rec["status"] == "ok"
    assert rec["fashion_mnist_source"] == "generated" and rec["fashion_mnist_samples"] == 350
    assert rec["mydataset_samples"] == 200 and (data_dir / "manifest.json").exists()

    page = (site / "report" / "index.html").read_text()
    assert page.index('<h2 id="findings">') < page.index('<h2 id="analysis">') \
        < page.index('<h3 id="runs-data_prep">')
    assert "Study <code>data_prep</code>. 1 run: 1 ok, 0 failed." in page
    analysis = (site / "report" / "analysis.html").read_text()
    runs = results.read_records(site / "results")
    studies = {r["study"] for r in runs}
    assert (len(runs), len(studies)) == (5, 3)  # toys x2, data_prep, trivial and broken
    assert f"**{len(runs)} runs**" not in analysis
    assert f"{len(runs)} runs</strong> in {len(studies)} studies" in analysis
    assert "generated offline" in analysis
    assert "from benchlib import" not in analysis  # code is hidden
    run_page = site / "report" / "data_prep" / f"{rec['run_id']}.html"
    assert run_page.exists() and "results.publish" not in run_page.read_text()
    assert "<img" in run_page.read_text()  # the sample image grid


def test_report_marks_failed_runs_and_links_their_notebooks(site):
    page = (site / "report" / "index.html").read_text()
    assert '<span class="failed">failed</span>' in page
    assert "asked to fail with x=0" in page
    link = re.search(r'href="(broken/\w+\.html)"', page).group(1)
    assert "ValueError" in (site / "report" / link).read_text()


def test_failed_run_page_shows_its_error_at_the_top(site):
    rec = next(r for r in results.read_records(site / "results") if r["table"] == "broken")
    page = (site / "report" / "broken" / f"{rec['run_id']}.html").read_text()
    assert '<span class="failed">failed</span>: ValueError: asked to fail with x=0' in page


def test_analysis_page_has_a_table_of_contents_of_its_sections(site):
    page = (site / "report" / "analysis.html").read_text()
    toc = re.search(r'<nav class="benchlib-toc">.*?</nav>', page, re.S).group(0)
    links = re.findall(r'href="#([^"]+)">([^<]+)<', toc)
    assert [t for _, t in links][:5] == [
        "Findings: the headline of each study", "All runs", "Failed runs", "Each study",
        "data_prep: Which data sets are here, real or generated? (notebook 00)"]
    ids = parse(site / "report" / "analysis.html").ids
    assert all(html.unescape(a) in ids for a, _ in links) and len(links) >= 8
    assert page.index("benchlib-toc") < page.index("90 · Analysis")


def test_report_zip_writes_one_archive_holding_the_site(site, monkeypatch, capsys):
    monkeypatch.setenv("BENCHLIB_OUTPUTS", str(site))
    assert main(["report", "--no-analysis", "--zip"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"report: {site / 'report' / 'index.html'}"
    assert re.fullmatch(rf"zip: {re.escape(str(site / publish.ZIP_NAME))} \(\d+\.\d MB; the "
                        r"folder: \d+\.\d MB\)", out[1])
    assert [p.name for p in site.glob("*.zip")] == [publish.ZIP_NAME]
    with zipfile.ZipFile(site / publish.ZIP_NAME) as zf:
        names = set(zf.namelist())
        assert "benchlib-report/index.html" in names and "benchlib-report/analysis.html" in names
        assert all(n.startswith("benchlib-report/") and not Path(n).name.startswith(".")
                   for n in names)
        on_disk = {f"benchlib-report/{p.relative_to(site / 'report').as_posix()}"
                   for p in (site / "report").rglob("*") if p.is_file()}
        assert names == on_disk
        assert zf.read("benchlib-report/index.html") == (site / "report" / "index.html").read_bytes()


def test_pages_are_kept_when_nothing_changed_and_redone_when_the_header_does(site):
    rec = next(r for r in results.read_records(site / "results") if r["study"] == "data_prep")
    page = site / "report" / "data_prep" / f"{rec['run_id']}.html"
    before = page.stat().st_mtime_ns
    publish.build(site, analysis=False)
    assert page.stat().st_mtime_ns == before
    (site / "report" / "analysis.html").rename(site / "report" / "analysis.kept")
    try:  # no analysis page: the run page no longer links to it, so it is made again
        publish.build(site, analysis=False)
        assert page.stat().st_mtime_ns != before and "analysis.html" not in page.read_text()
    finally:
        (site / "report" / "analysis.kept").rename(site / "report" / "analysis.html")
        publish.build(site, analysis=False)


# ---------------------------------------------------------------- in a browser



def test_landing_and_run_pages_render_from_file_offline_with_every_plot(site, headless_chromium):
    report_dir = site / "report"
    rec = next(r for r in results.read_records(site / "results") if r["study"] == "data_prep")
    run_page = report_dir / "data_prep" / f"{rec['run_id']}.html"
    for path, shot in [(report_dir / "index.html", "report_landing.png"),
                       (run_page, "report_run.png"), (report_dir / "analysis.html", None)]:
        page, requests = open_offline(headless_chromium, path)
        try:
            assert page.title()
            images = page.locator("img").all()
            assert not broken_images(page), f"{path.name}: images that did not load"
            if path == run_page:
                assert images, "the run page shows no plot"
                # the header was laid out with the shared stylesheet: the parameters table
                # is styled, not the browser's default
                assert page.locator(".benchlib-params tr.set th").first.evaluate(
                    "e => getComputedStyle(e).backgroundColor") == "rgb(255, 246, 214)"
                page.get_by_text("Read next:").wait_for()
            if path.name == "analysis.html":
                assert len(images) >= 1
            if shot:
                screenshot(page, page.locator("h1").first, SCREENSHOTS / shot)
            assert [u for u in requests if not u.startswith(("file://", "data:"))] == []
        finally:
            page.context.close()
    assert (SCREENSHOTS / "report_landing.png").stat().st_size > 10_000


# ---------------------------------------------------------------- where it cannot write


def _no_analysis(monkeypatch):
    """The analysis must not start: the report's folder is checked before it."""
    def refuse(outputs):
        raise AssertionError("the analysis ran before the report folder was checked")
    monkeypatch.setattr(publish, "run_analysis", refuse)


@pytest.mark.parametrize("zip_flag", [[], ["--zip"]])
def test_an_unwritable_report_folder_is_one_line_before_the_analysis(tmp_path, monkeypatch,
                                                                     capsys, zip_flag):
    outputs = tmp_path / "outputs"
    (outputs / "results").mkdir(parents=True)
    (outputs / "report").write_text("not a folder")  # unwritable for root too
    _no_analysis(monkeypatch)
    assert main(["report", "--outputs", str(outputs), *zip_flag]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line == (f"benchlib report: outputs: cannot write the report in {outputs / 'report'}: "
                    "it is a file, not a folder; give --outputs (or BENCHLIB_OUTPUTS) a folder "
                    "this user can write")
    assert (outputs / "report").read_text() == "not a folder"
    assert not (outputs / publish.ZIP_NAME).exists()


def test_a_zip_that_cannot_be_written_is_one_line_before_the_analysis(tmp_path, monkeypatch,
                                                                      capsys):
    outputs = tmp_path / "outputs"
    (outputs / "results").mkdir(parents=True)
    (outputs / publish.ZIP_NAME / "x").mkdir(parents=True)  # a folder where the zip goes
    _no_analysis(monkeypatch)
    assert main(["report", "--outputs", str(outputs), "--zip"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"benchlib report: outputs: cannot write the zip "
                    f"{outputs / publish.ZIP_NAME}: it is a folder, not a file; move it away or "
                    "give --outputs (or BENCHLIB_OUTPUTS) another folder")
    assert not (outputs / "report" / "index.html").exists()


def test_a_stale_failed_analysis_goes_once_one_passes_and_never_into_the_zip(tmp_path,
                                                                          monkeypatch, capsys):
    outputs = tmp_path / "outputs"
    (outputs / "results").mkdir(parents=True)
    report_dir = outputs / "report"
    failed = report_dir / "analysis-failed.html"
    monkeypatch.setattr(publish, "_compare_link", lambda outputs, report_dir: ("", None))
    monkeypatch.setattr(publish, "run_analysis",
                        lambda outputs: (TRIVIAL, {"type": "ValueError", "message": "boom"}))
    assert main(["report", "--outputs", str(outputs), "--zip"]) == 1
    assert failed.exists() and "analysis failed: boom" in (report_dir / "index.html").read_text()
    assert "zip not written" in capsys.readouterr().err
    assert not (outputs / publish.ZIP_NAME).exists()  # its index would link a page it lacks
    assert main(["report", "--outputs", str(outputs), "--zip", "--no-analysis"]) == 0
    with zipfile.ZipFile(outputs / publish.ZIP_NAME) as zf:
        assert "benchlib-report/analysis-failed.html" not in zf.namelist()
    monkeypatch.setattr(publish, "run_analysis", lambda outputs: (TRIVIAL, None))
    assert main(["report", "--outputs", str(outputs), "--zip"]) == 0
    assert not failed.exists() and (report_dir / "analysis.html").exists()
    with zipfile.ZipFile(outputs / publish.ZIP_NAME) as zf:
        assert "benchlib-report/analysis.html" in zf.namelist()
        assert "benchlib-report/analysis-failed.html" not in zf.namelist()


def test_a_comparison_of_sets_that_no_longer_share_a_row_leaves_the_report(tmp_path,
                                                                           monkeypatch):
    outputs = tmp_path / "outputs"
    (outputs / "results").mkdir(parents=True)
    stale = outputs / "report" / "compare.html"
    stale.parent.mkdir()
    stale.write_text("<p>an old comparison</p>")
    monkeypatch.setattr(publish, "run_analysis", lambda outputs: (TRIVIAL, None))
    assert main(["report", "--outputs", str(outputs), "--zip"]) == 0
    assert not stale.exists()
    with zipfile.ZipFile(outputs / publish.ZIP_NAME) as zf:
        assert "benchlib-report/compare.html" not in zf.namelist()


def test_records_of_the_wrong_shape_are_skipped_with_a_warning_naming_each(tmp_path, capsys):
    from conftest import write_wrong_shapes

    outputs = tmp_path / "outputs"
    good = results.make_record(run_id="abc123", table="s", notebook="n.ipynb", params={"x": 1},
                               env={"hostname": "h1"}, started_at=results.now(), status="ok",
                               metrics={"samples_per_s": 1.0})
    results.write_record(outputs / "results", good)
    wrong = write_wrong_shapes(outputs / "results", good)
    assert main(["report", "--outputs", str(outputs), "--no-analysis"]) == 0
    captured = capsys.readouterr()
    for path, why in wrong:
        assert captured.err.count(f"benchlib: skipped {path}: {why}\n") == 1
    assert captured.out == f"report: {outputs / 'report' / 'index.html'}\n"
    assert sorted(p.name for p in (outputs / "report" / "records" / "s").iterdir()) == ["abc123.json"]


def test_each_finding_shows_its_studys_main_figure_small_and_full_size_on_click(tmp_path):
    """The landing page's figure beside a finding is drawn by the study's own figure
    function from the runs the finding sums up (notebook 90 shows the same one); a study
    without one (data_prep) gets none, and a figure no finding draws any more is removed."""
    import matplotlib.image
    from test_report_landing import dist_records, record

    from benchlib.analysis import findings as analysed
    from benchlib.analysis.sections import Records, figure_of
    from benchlib.config import studies
    from benchlib.report import landing

    runs = dist_records() + [record("data_prep", "00_data_prep.ipynb", {"dataset": "all"},
                                    {"cifar10_samples": 2457, "cifar10_source": "generated"})]
    report_dir = tmp_path / "report"
    stale = report_dir / index.THUMBS / "fault_tolerance-T1.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"\x89PNG old")
    found = landing.findings(runs)
    beds = landing.testbeds(runs)
    thumbs = publish.write_thumbnails(found, runs, beds, report_dir)
    assert [found[i].study for i in thumbs] == ["dp_vs_ddp"]
    assert sorted(p.name for p in (report_dir / index.THUMBS).iterdir()) == ["dp_vs_ddp-T1.png"]
    drawn = matplotlib.image.imread(report_dir / index.THUMBS / "dp_vs_ddp-T1.png")
    fig = figure_of(analysed.figure(studies.named("dp_vs_ddp"), Records(records=runs[:2])))
    width, height = fig.get_size_inches()
    assert abs(drawn.shape[1] / drawn.shape[0] - width / height) < 0.15  # the same figure
    i = next(iter(thumbs))
    site = index.Site(report_dir, tmp_path)
    site.records = {r["run_id"]: report_dir / "records" / f"{r['run_id']}.json" for r in runs}
    item = index.finding(found[i], site, [], True, thumbs[i])
    assert item.startswith('<li class="some"><a class="thumb" href="figures/dp_vs_ddp-T1.png"')
    assert '<img src="figures/dp_vs_ddp-T1.png" alt="dp_vs_ddp: its main figure"' in item

