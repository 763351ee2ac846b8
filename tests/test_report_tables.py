"""The landing page of a smoke study's records: one record for each row of
params/smoke_cpu.yaml, with figures of the size the smoke study gives (nothing run), and
the report built over them without the analysis. Its findings each name the work (model,
data set, batch, device), and in headless chromium at a 1400 px window every run table
shows its key columns and keeps run ids and words whole."""

from __future__ import annotations

import html
import re

import pytest
from browser import ROOT, open_offline

from benchlib.core import envinfo
from benchlib.projection.inputs import build_inputs
from benchlib.records import results
from benchlib.report import publish
from benchlib.runs.params import load_plan

WINDOW = 1400
BUSY = {"start": {"load_1m": 5.1, "cpus": 2, "running": 3},
        "end": {"load_1m": 4.9, "cpus": 2, "running": 2}, "busy": True}


def figures(study: str, params: dict, i: int) -> dict:
    """What a smoke row's record holds, as the study's notebook publishes it (the sizes of
    a busy 2-core VM's)."""
    rate = {"device_name": "cpu", "samples_per_s": 100.0 + i, "samples_per_s_p10": 95.0 + i,
            "samples_per_s_p90": 104.0 + i, "samples_per_s_n": 3, "data_s": 0.01,
            "compute_s": 0.05, "threads_per_rank": 1, "model_params": 11_689_512,
            "world_size": params.get("nproc_per_node", 1) * params.get("nnodes", 1),
            "busbw_gbps": 0.8 if params.get("allreduce") else None}
    return {
        "data_prep": {"prep_s": 12.0, "fashion_mnist_samples": 6000,
                      "fashion_mnist_source": "generated"},
        "memory_and_batch": {"device_name": "cpu", "largest_batch": 8, "trials": 3,
                             "largest_batch_processes": 3, "batches_tried": 1,
                             "boundary": "The largest batch that trains is 8, in all of 3 "
                                         "processes; it is the max_batch cap (8)"},
        "fault_tolerance": {**rate, "restarts": 1, "recovery_s": 9.5, "steps_redone": 3,
                            "loss_diff": 0.0, "loss_last": 2.1},
        "transformer_training": {**rate, "tokens_per_s": 6400.0 + i, "tokens_per_s_p10": 6000.0,
                                 "tokens_per_s_p90": 6800.0, "peak_bytes": 900 * 2**20,
                                 "peak_kind": "peak RSS"},
        "compile": {**rate, "compile_s": 27.6, "cold_compile_s": 30.1, "speedup": 0.91,
                    "speedup_verdict": "inconclusive", "break_even_n": 1, "first_steps": 2,
                    "loss_parity": "not judged", "graph_breaks": 0},
    }.get(study, rate)


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory):
    """outputs/ with a record of every smoke row (notebook 45's projected from the records
    before it, as its notebook does), and the report without the analysis."""
    outputs = tmp_path_factory.mktemp("smoke") / "outputs"
    env, made = envinfo.collect(), []
    for i, row in enumerate(load_plan(ROOT / "params" / "smoke_cpu.yaml", read_notebooks=False)):
        study = row.config.study
        metrics = figures(study, row.params, i)
        if study == "scaling_projection":
            inputs = build_inputs(row.config, results.frame(made))
            metrics = {"largest_devices": 1024, "efficiency_largest": 0.31, "stops_at_devices": 4,
                       "stops_by": "shared cores", "compute_source": inputs.sources["compute_s"]}
        rec = results.make_record(
            run_id=results.run_id_for(row.table, row.notebook.stem, row.params), table=row.table,
            notebook=row.notebook.name, params=row.params, env=env, status="ok",
            started_at=f"2026-11-28T10:{i:02d}:00+00:00", host_load=BUSY,
            metrics={k: v for k, v in metrics.items() if v is not None})
        rec["finished_at"] = f"2026-11-28T10:{i:02d}:40+00:00"
        results.write_record(outputs / "results", rec)
        made.append(rec)
    publish.build(outputs, analysis=False)
    return outputs, made


def test_every_finding_names_the_model_data_set_batch_and_device_it_measured(smoke_report):
    """Each study's headline on the landing page, as a reader sees it (tags stripped): the
    work of the row it comes from. Notebook 00 prepares data and trains nothing."""
    outputs, records = smoke_report
    page = (outputs / "report" / "index.html").read_text()
    def shown(part: str) -> str:
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", part)).split())

    first = dict(re.findall(r'<li class="some">.*?<strong>(\w+)</strong>.*?'
                            r'<div class="headline">(.*?)</div>', page, re.S))
    studies = {r["study"] for r in records}
    assert set(first) == studies
    assert "1 runs" not in page and "Study <code>memory_and_batch</code>. 1 run: 1 ok" in page
    for study in sorted(studies - {"data_prep"}):
        headline = shown(first[study])
        ran = [r["params"] for r in records if r["study"] == study]
        if study == "scaling_projection":  # the work of the record it projects from
            ran = [r["params"] for r in records if r["study"] == "framework_comparison"]
        assert any(p["model"] in headline and p["dataset"] in headline for p in ran), headline
        assert re.search(r"\bbatch \d+", headline) and re.search(r"\bon (1 )?cpu\b", headline), \
            headline
    assert shown(first["data_prep"]).startswith("fashion-mnist: 6,000 samples, generated")




# per run table: where its key columns (all but took, finished, error) end, the part of its
# box on screen, and each run id or word of a cell the browser laid out over two lines
MEASURE = """() => [...document.querySelectorAll('h3[id^="runs-"]')].map(h => {
  const box = h.nextElementSibling.nextElementSibling, table = box.querySelector('table');
  const heads = [...table.rows[0].cells], names = heads.map(c => c.textContent);
  const last = heads[names.indexOf('took') - 1];
  const lines = node => new Set([...node.getClientRects()].map(r => Math.round(r.top))).size;
  const broken = [];
  for (const cell of table.querySelectorAll('td')) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node; (node = walk.nextNode());) {
      for (const m of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        if (lines(range) > 1) broken.push(m[0]);
      }
    }
  }
  return {study: h.id, keyRight: last.getBoundingClientRect().right, key: last.textContent,
          shown: Math.min(box.getBoundingClientRect().right, window.innerWidth),
          ids: [...table.querySelectorAll('.id')].filter(e => lines(e) > 1).map(e => e.textContent),
          broken};
})"""


def test_run_tables_show_their_key_columns_in_a_1400_px_window_with_ids_and_words_whole(
        smoke_report, headless_chromium):
    """The framework table (12 parameters vary between its rows) used to be 1,541 px wide
    inside a 1,152 px box, its precision and figures off screen, with words broken
    anywhere ("syntheti c", "host-conte nded")."""
    outputs, records = smoke_report
    page, _ = open_offline(headless_chromium, outputs / "report" / "index.html", width=WINDOW)
    try:
        tables = page.evaluate(MEASURE)
    finally:
        page.context.close()
    assert {t["study"] for t in tables} == {f"runs-{r['study']}" for r in records}
    for t in tables:
        assert t["keyRight"] <= t["shown"] <= WINDOW, t
        assert t["ids"] == [] and t["broken"] == [], t
    framework = next(t for t in tables if t["study"] == "runs-framework_comparison")
    assert framework["key"] == "held back by"  # the study's figure and bottleneck in view
