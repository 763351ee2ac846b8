"""Each study's headline on the landing page: from its ok records, the claims (figures
with spread, n and the records they came from) and any caveat the records show the cause
of. One function per study; HEADLINES maps the studies (config/studies.py) to them."""

from __future__ import annotations

import statistics
from typing import Callable

from benchlib.analysis import data_prep
from benchlib.core.timing import quantile
from benchlib.report.figures import (
    Claim,
    Figure,
    Record,
    above_linear_caveat,
    device_text,
    joined_caveats,
    label,
    metric,
    number,
    ranks_of,
    ratio_figure,
    same_work,
    samples_figure,
    shared_cores_caveat,
    varying_params,
)


def _data_prep(ok: list[Record]) -> tuple[list[Claim], str]:
    rec = max(ok, key=lambda r: r["finished_at"])  # the latest preparation describes the data
    m = rec.get("metrics") or {}
    claims = []
    for name in data_prep.names(m):  # the data sets notebook 90's table lists, in its order
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
    varying = [n for n in varying_params(measured) if n not in ("seed", "path")]
    context = [n for n in varying if n in IO_CONTEXT]
    knobs = [n for n in varying if n not in IO_CONTEXT]
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


def _memory(ok: list[Record]) -> tuple[list[Claim], str]:
    """Per search: the largest batch that trains, and where the next one up stopped."""
    claims = []
    for rec in sorted(ok, key=lambda r: r["finished_at"]):
        m, p = rec.get("metrics") or {}, rec.get("params") or {}
        if m.get("largest_batch") is None:
            claims.append(Claim(f"{p.get('model')} on {m.get('device_name')}",
                                note=m.get("boundary", "")))
            continue
        claims.append(Claim(f"{p.get('model')} on {m.get('device_name')}",
                            Figure(f"batch {m['largest_batch']}", "the largest that trains",
                                   sources=[("", rec)]),
                            note=m.get("boundary", "")))
    return claims, ""


def _dist(ok: list[Record]) -> tuple[list[Claim], str]:
    work = ("dataset", "model", "depth", "alpha", "batch_size", "device")
    claims: list[tuple[tuple, Claim]] = []
    for group in same_work(ok, work).values():
        singles = [r for r in group if r["params"].get("strategy") == "single"]
        base = singles[0] if len(singles) == 1 else None
        for rec in group:
            p, m = rec["params"], rec.get("metrics") or {}
            if p.get("strategy") == "single":
                continue
            ranks = int(ranks_of(rec))
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
    return ordered, joined_caveats(shared_cores_caveat(ok), above_linear_caveat(ordered))


def _multinode(ok: list[Record]) -> tuple[list[Claim], str]:
    work = ("trainer", "dataset", "model", "depth", "alpha", "batch_size", "device")
    claims: list[tuple[tuple, Claim]] = []
    for group in same_work(ok, work).values():
        ones = [r for r in group if ranks_of(r) == 1]
        base = ones[0] if len(ones) == 1 else None  # two baselines: which one is ambiguous
        for rec in group:
            if ranks_of(rec) == 1:
                continue
            p = rec["params"]
            subject = (f"{p.get('trainer')} via {p.get('launcher')} on {p.get('nnodes')} node(s) "
                       f"x {p.get('nproc_per_node')}")
            order = (-ranks_of(rec), p.get("trainer") != "ddp", p.get("launcher") != "torchrun")
            figure = ratio_figure(rec, base, f"over 1 rank of {p.get('trainer')}",
                                  "epochs") if base else None
            note = "" if figure else "no 1-rank run of the same trainer and work to compare with"
            claims.append((order, Claim(subject, figure or samples_figure(rec, "epochs"), note)))
    if not claims:
        return [Claim(f"{r['params'].get('trainer')} on 1 rank", samples_figure(r, "epochs"))
                for r in ok], ""
    ordered = [c for _, c in sorted(claims, key=lambda oc: oc[0])]
    return ordered, joined_caveats(shared_cores_caveat(ok), above_linear_caveat(ordered))


def _fault(ok: list[Record]) -> tuple[list[Claim], str]:
    setup = ("model", "dataset", "nproc_per_node", "fail_at_step", "checkpoint_every")
    claims = []
    for group in same_work(ok, setup).values():
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
    for group in same_work(ok, work).values():
        for rec in group:
            p = rec["params"]
            what = (f"{p.get('arch')} {p.get('image_size')}px batch {p.get('batch_size')} "
                    f"{p.get('dataset')} {_variant(rec)}")
            if (number(p.get("nproc_per_node")) or 1) == 1:
                mfu = metric(rec, "mfu")
                note = f"MFU {mfu:.1%}" if mfu is not None else \
                    "MFU unknown: no published peak for this device"
                device = device_text([rec]) or p.get("device")
                order = (p.get("dataset") != "synthetic", _variant(rec) != "fp32", what)
                one.append((order, Claim(f"{what} on 1 {device}", samples_figure(rec, "repeats"),
                                         note)))
                continue
            bases = [r for r in group if (number(r["params"].get("nproc_per_node")) or 1) == 1
                     and _variant(r) == _variant(rec)]
            figure = ratio_figure(rec, bases[0], "over 1 device", "repeats") \
                if len(bases) == 1 else None
            more.append(((what,), Claim(f"{what} on {p.get('nproc_per_node')} devices",
                                        figure or samples_figure(rec, "repeats"),
                                        "" if figure else "no 1-device run to compare with")))
    claims = [c for _, c in sorted(one, key=lambda oc: oc[0])] + \
        [c for _, c in sorted(more, key=lambda oc: oc[0])]
    return claims, joined_caveats(shared_cores_caveat(ok), above_linear_caveat(claims))


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
        # a property of the model, checked on seed 003's published table: the same figure
        # whatever these records say, so it is labelled as the model's, not as a finding
        note += (f"; the model itself (not this run) is {check:.1f}% off seed 003's published "
                 "2- and 4-node rows (median)") if check is not None else ""
        claims.append(Claim(f"projected from {m.get('compute_source')}",
                            Figure(f"{eff:.0%}", f"efficiency at {largest:,.0f} devices",
                                   sources=[("", rec)]), note))
    return claims, ""


HEADLINES: dict[str, Callable[[list[Record]], tuple[list[Claim], str]]] = {
    "data_prep": _data_prep,
    "single_device_io": _io,
    "memory_and_batch": _memory,
    "dp_vs_ddp": _dist,
    "multinode_lightning": _multinode,
    "fault_tolerance": _fault,
    "framework_comparison": _framework,
    "scaling_projection": _projection,
}
