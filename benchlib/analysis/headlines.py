"""Each study's headline: from its ok runs (rows of the records' frame, `results.frame` or
`load_results`), the claims (figures with spread p10-p90, n and the run ids they came
from) and any caveat the runs show the cause of. One function per study; `HEADLINES`
maps the studies (config/studies.py) to them.

The report's landing page (report/landing.py) and notebook 90's findings (`summary`)
both say a study's headline through `headline` and `sentence`, so the two say the same."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable

import pandas as pd

from benchlib.analysis import common, data_prep
from benchlib.analysis.claims import (
    Claim,
    Figure,
    Row,
    above_linear_caveat,
    device_text,
    fmt,
    joined_caveats,
    label,
    metric,
    ranks_of,
    ratio_figure,
    rows,
    same_work,
    samples_figure,
    value,
    varying,
)
from benchlib.config import SingleDeviceIoConfig, studies
from benchlib.core.stats import quantile

Headline = tuple[list[Claim], str]  # the claims (the first is the headline) and a caveat


def _data_prep(ok: pd.DataFrame) -> Headline:
    run = rows(ok)[-1]  # the latest preparation describes the data
    claims = []
    present = [c for c in ok.columns if value(run, c) is not None]
    for name in data_prep.names(present):  # the data sets notebook 90's table lists, in order
        source = value(run, f"{name}_source") or "unknown source"
        claims.append(Claim(name.replace("_", "-"),
                            Figure(f"{int(value(run, f'{name}_samples')):,}",
                                   f"samples, {source}", sources=[("", run["run_id"])])))
    generated = [c for c in claims if "generated" in c.figure.what]
    caveat = ("Generated data has the real on-disk format: IO figures are comparable, "
              "accuracy figures are not." if generated else "")
    return claims, caveat


IO_CONTEXT = ("dataset", "mode", "device", "model", "batch_size", "epochs")
IO_PARAMS = [f.name for f in dataclasses.fields(SingleDeviceIoConfig)
             if f.name not in ("seed", "path")]


def _io(ok: pd.DataFrame) -> Headline:
    """Per context (data set, mode, device, ...): the fastest setting of the knobs that were
    swept (variant, num_workers, ...), and how many times the slowest one it is."""
    measured = ok[pd.Series([bool(metric(r, "samples_per_s")) for r in rows(ok)],
                            index=ok.index, dtype=bool)]
    swept = varying(measured, sorted(IO_PARAMS))
    context = [n for n in swept if n in IO_CONTEXT]
    knobs = [n for n in swept if n not in IO_CONTEXT]
    claims = []
    for _, group in sorted(same_work(measured, tuple(context)).items()):
        ranked = sorted(group, key=lambda r: -metric(r, "samples_per_s"))
        best, worst = ranked[0], ranked[-1]
        device = device_text(group)
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


def _ordered(claims: list[tuple[tuple, Claim]]) -> list[Claim]:
    return [c for _, c in sorted(claims, key=lambda oc: oc[0])]


def _memory(ok: pd.DataFrame) -> Headline:
    """Per search (notebook 15, `benchlib maxbatch`): the largest batch that trains, and
    where the next one up stopped."""
    claims = []
    for run in rows(ok.sort_values("finished_at")):
        subject = f"{value(run, 'model')} on {value(run, 'device_name')}"
        boundary = value(run, "boundary") or ""
        largest = value(run, "largest_batch")
        figure = None if largest is None else Figure(
            f"batch {int(largest)}", "the largest that trains", sources=[("", run["run_id"])])
        claims.append(Claim(subject, figure, note=boundary))
    return claims, ""


def _dist(ok: pd.DataFrame) -> Headline:
    work = ("dataset", "model", "depth", "alpha", "batch_size", "device")
    claims: list[tuple[tuple, Claim]] = []
    for group in same_work(ok, work).values():
        singles = [r for r in group if value(r, "strategy") == "single"]
        base = singles[0] if len(singles) == 1 else None
        for run in group:
            if value(run, "strategy") == "single":
                continue
            ranks = int(ranks_of(run))
            backend = value(run, "backend_used") or value(run, "backend")
            launcher = value(run, "launcher")
            if value(run, "strategy") == "dp":
                subject, order = f"DataParallel on {ranks} device(s)", (2, "")
            else:
                subject = f"DDP via {launcher} on {ranks} {backend} ranks"
                order = (0 if launcher == "torchrun" else 1, str(launcher))
            figure = ratio_figure(run, base, "over one process", "epochs") \
                if base is not None else None
            if figure is None:
                claims.append((order, Claim(subject, samples_figure(run, "epochs"),
                                            "no single-process run of the same work to "
                                            "compare with")))
            else:
                claims.append((order, Claim(subject, figure)))
    if not claims:  # only single-process runs
        return [Claim(f"one process, {label(r, ['model', 'dataset'])}",
                      samples_figure(r, "epochs")) for r in rows(ok)], ""
    ordered = _ordered(claims)
    return ordered, joined_caveats(common.shared_cores_caveat(ok),
                                   above_linear_caveat(ordered, ok))


def _multinode(ok: pd.DataFrame) -> Headline:
    work = ("trainer", "dataset", "model", "depth", "alpha", "batch_size", "device")
    claims: list[tuple[tuple, Claim]] = []
    for group in same_work(ok, work).values():
        ones = [r for r in group if ranks_of(r) == 1]
        base = ones[0] if len(ones) == 1 else None  # two baselines: which one is ambiguous
        for run in group:
            if ranks_of(run) == 1:
                continue
            trainer, launcher = value(run, "trainer"), value(run, "launcher")
            subject = (f"{trainer} via {launcher} on {value(run, 'nnodes')} node(s) "
                       f"x {value(run, 'nproc_per_node')}")
            order = (-ranks_of(run), trainer != "ddp", launcher != "torchrun")
            figure = ratio_figure(run, base, f"over 1 rank of {trainer}", "epochs") \
                if base is not None else None
            note = "" if figure else "no 1-rank run of the same trainer and work to compare with"
            claims.append((order, Claim(subject, figure or samples_figure(run, "epochs"), note)))
    if not claims:
        return [Claim(f"{value(r, 'trainer')} on 1 rank", samples_figure(r, "epochs"))
                for r in rows(ok)], ""
    ordered = _ordered(claims)
    return ordered, joined_caveats(common.shared_cores_caveat(ok),
                                   above_linear_caveat(ordered, ok))


def _fault(ok: pd.DataFrame) -> Headline:
    setup = ("model", "dataset", "nproc_per_node", "fail_at_step", "checkpoint_every")
    claims = []
    for group in same_work(ok, setup).values():
        first = group[0]
        subject = (f"{value(first, 'nproc_per_node')} ranks, a rank killed after step "
                   f"{value(first, 'fail_at_step')}, a checkpoint every "
                   f"{value(first, 'checkpoint_every')}")
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
                        [("", r["run_id"]) for r in recovered])
        redone = sorted({int(metric(r, "steps_redone") or 0) for r in recovered})
        notes = [f"{'/'.join(map(str, redone))} step(s) redone"]
        diffs = [(metric(r, "loss_diff"), metric(r, "loss_last")) for r in recovered]
        if all(d is not None and last is not None for d, last in diffs):
            same = all(d <= 1e-6 * max(abs(last), 1) for d, last in diffs)
            notes.append("final loss equal to the uninterrupted run's" if same else
                         "final loss differs from the uninterrupted run's")
        claims.append(Claim(subject, figure, ", ".join(notes)))
    return claims, ""


def _variant(run: Row) -> str:
    return (str(value(run, "precision")) + ("+nhwc" if value(run, "channels_last") else "")
            + ("+compile" if value(run, "compile") else ""))


def _devices(run: Row) -> float:
    return metric(run, "nproc_per_node") or 1


def _framework(ok: pd.DataFrame) -> Headline:
    work = ("arch", "dataset", "image_size", "batch_size", "device")
    one, more = [], []
    for group in same_work(ok, work).values():
        for run in group:
            what = (f"{value(run, 'arch')} {value(run, 'image_size')}px batch "
                    f"{value(run, 'batch_size')} {value(run, 'dataset')} {_variant(run)}")
            if _devices(run) == 1:
                mfu = metric(run, "mfu")
                note = f"MFU {mfu:.1%}" if mfu is not None else \
                    "MFU unknown: no published peak for this device"
                device = device_text([run]) or value(run, "device")
                order = (value(run, "dataset") != "synthetic", _variant(run) != "fp32", what)
                one.append((order, Claim(f"{what} on 1 {device}", samples_figure(run, "repeats"),
                                         note)))
                continue
            bases = [r for r in group if _devices(r) == 1 and _variant(r) == _variant(run)]
            figure = ratio_figure(run, bases[0], "over 1 device", "repeats") \
                if len(bases) == 1 else None
            more.append(((what,), Claim(f"{what} on {value(run, 'nproc_per_node')} devices",
                                        figure or samples_figure(run, "repeats"),
                                        "" if figure else "no 1-device run to compare with")))
    claims = _ordered(one) + _ordered(more)
    return claims, joined_caveats(common.shared_cores_caveat(ok),
                                  above_linear_caveat(claims, ok))


def _lm(ok: pd.DataFrame) -> Headline:
    """Per language model: each configuration's tokens/s with its spread; its MFU and peak
    memory per rank in the note."""
    claims = []
    for run in rows(ok.sort_values(["model", "strategy", "ac", "compile"], kind="stable")):
        tps = metric(run, "tokens_per_s")
        if tps is None:
            continue
        lo, hi = metric(run, "tokens_per_s_p10"), metric(run, "tokens_per_s_p90")
        figure = Figure(fmt(tps), "tokens/s", (fmt(lo), fmt(hi)) if lo and hi else None,
                        f"n={int(metric(run, 'samples_per_s_n') or 1)}",
                        [("", run["run_id"])])
        ranks = f" on {int(metric(run, 'world_size'))} ranks" \
            if value(run, "strategy") != "single" else ""
        saver = ", ".join(filter(None, [f"ac {value(run, 'ac')}" if value(run, "ac") != "none"
                                        else "", "compiled" if value(run, "compile") else ""]))
        mfu, peak = metric(run, "mfu"), metric(run, "peak_bytes")
        note = "; ".join(filter(None, [f"MFU {mfu:.1%}" if mfu is not None else "MFU unknown",
                                       f"peak {peak / 2**20:,.0f} MiB a rank" if peak else ""]))
        claims.append(Claim(f"{value(run, 'model')} {value(run, 'strategy')}{ranks}"
                            + (f" ({saver})" if saver else ""), figure, note))
    return claims, common.shared_cores_caveat(ok)


def _projection(ok: pd.DataFrame) -> Headline:
    claims = []
    for run in rows(ok.sort_values("started_at", kind="stable")):
        largest, stops = metric(run, "largest_devices"), metric(run, "stops_at_devices")
        eff = metric(run, "efficiency_largest")
        if largest is None or eff is None:
            continue
        note = f"{value(run, 'stops_by')} sets the step from {stops:,.0f} devices" if stops \
            else "compute sets the step at every size"
        check = metric(run, "check_median_abs_error_pct")
        # a property of the model, checked on seed 003's published table: the same figure
        # whatever these records say, so it is labelled as the model's, not as a finding
        note += (f"; the model itself (not this run) is {check:.1f}% off seed 003's published "
                 "2- and 4-node rows (median)") if check is not None else ""
        claims.append(Claim(f"projected from {value(run, 'compute_source')}",
                            Figure(f"{eff:.0%}", f"efficiency at {largest:,.0f} devices",
                                   sources=[("", run["run_id"])]), note))
    return claims, ""


HEADLINES: dict[str, Callable[[pd.DataFrame], Headline]] = {
    "data_prep": _data_prep,
    "single_device_io": _io,
    "memory_and_batch": _memory,
    "dp_vs_ddp": _dist,
    "multinode_lightning": _multinode,
    "fault_tolerance": _fault,
    "framework_comparison": _framework,
    "transformer_training": _lm,
    "scaling_projection": _projection,
}


def headline(ok: pd.DataFrame) -> Headline:
    """The headline of one study's ok runs on one testbed (rows of the records' frame, of
    one study; the frame may hold other studies' columns): its claims and caveat. A study
    with no headline function, or whose runs report no figure it is summarised by, says
    so as its one claim."""
    ok = ok.sort_values("finished_at", kind="stable")  # the same order from either caller
    notebook = value(rows(ok)[-1], "notebook")
    function = HEADLINES.get(studies.of_notebook(notebook))
    if function is None:
        return [Claim(f"{len(ok)} ok run(s)",
                      note=f"no headline figure is defined for {notebook}")], ""
    claims, caveat = function(ok)
    if not claims:
        return [Claim(f"{len(ok)} ok run(s)", note="none of them reported the figure this "
                      "study is summarised by")], caveat
    return claims, caveat


def sentence(claims: list[Claim], caveat: str) -> str:
    """A headline as one line of text: the first claim, "Also:" the others, the caveat."""
    body = claims[0].text() + "."
    if len(claims) > 1:
        body += " Also: " + "; ".join(c.text() for c in claims[1:]) + "."
    return body + (" " + caveat if caveat else "")


def summary(df: pd.DataFrame) -> str:
    """Notebook 90's findings, in Markdown: one line per study and testbed from the ok
    runs of the frame, each the sentence the report's landing page gives for them."""
    ok = df[df["status"] == "ok"] if not df.empty else df
    if ok.empty:
        return "No ok run yet, so no findings."
    ok = ok.assign(_study=ok["notebook"].map(studies.of_notebook),
                   _testbed=ok["testbed_id"].fillna("") if "testbed_id" in ok else "")
    lines = []
    for (name, _), runs in sorted(ok.groupby(["_study", "_testbed"], sort=False),
                                  key=lambda kv: (studies.order(kv[0][0]), kv[0])):
        runs = runs.drop(columns=["_study", "_testbed"])
        question = studies.BY_NAME[name].question if name in studies.BY_NAME else ""
        bed = value(rows(runs)[0], "testbed")
        where = f" (testbed {bed})" if bed else ""
        lines.append(f"- **{name}**{where}: *{question}* " if question else
                     f"- **{name}**{where}: ")
        lines[-1] += sentence(*headline(runs))
    return "\n".join(lines)
