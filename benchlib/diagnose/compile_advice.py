"""What diagnose says of torch.compile for a compute-bound run: the break-even the compile
study (notebook 55) measured on the same testbed for the same work (model, data, batch,
precision, and the sequence or image size where both say one), with its interval; where
no row of the same work has one, "not measured here" and the command that measures it.
A run that compiles already gets no compile advice."""

from __future__ import annotations

from typing import Any

import pandas as pd

from benchlib.config.compile import CompileConfig
from benchlib.config.performance import compile_mode, compiled
from benchlib.core.compile_cost import break_even_text

STUDY = CompileConfig.study  # notebook 55's study, by the registry's name for it
SAME = ("model", "dataset", "batch_size", "precision")  # the same work, always
IF_BOTH = ("seq_len", "image_size")  # the same where both records say one


def _same_work(p: dict[str, Any], rows: pd.DataFrame) -> pd.DataFrame:
    """The compile study's ok rows of the run's work (`rows`: records of one testbed)."""
    if rows is None or rows.empty or "study" not in rows:
        return pd.DataFrame()
    found = rows[(rows["study"] == STUDY) & (rows["status"] == "ok")]
    for name in SAME:
        want = p.get(name, "fp32" if name == "precision" else None)
        found = found[found[name] == want] if name in found else found.iloc[:0]
    for name in IF_BOTH:
        if p.get(name) and name in found:
            found = found[found[name].isna() | (found[name] == p[name])]
    return found


def command(p: dict[str, Any]) -> str:
    """The compile study's run of the same work (its default mode, cold)."""
    args = [f"-p {n} {p[n]}" for n in (*SAME, *IF_BOTH, "device") if p.get(n) not in (None, "", 0)]
    return "python -m benchlib run 55_compile " + " ".join(args)


def sentence(record: dict[str, Any], same_testbed: pd.DataFrame | None) -> str:
    """'; torch.compile on this testbed for the same work: default, cold: pays off after
    ... (run X)' for each row of notebook 55, or '; torch.compile: not measured here for
    this work (`python -m benchlib run 55_compile ...`)'; '' for a compiled run."""
    from benchlib.studies.compile import break_even_of

    p = record.get("params") or {}
    if compiled(p.get("compile")):
        return ""
    found = _same_work(p, same_testbed)
    if found.empty:
        return (f"; torch.compile: not measured here for this work (`{command(p)}` measures "
                "after how many steps it pays off, cold and warm)")
    said = []
    for _, row in found.sort_values("started_at").iterrows():
        steps, low, high, n = break_even_of(row.to_dict())
        said.append(f"{compile_mode(row.get('compile'))}, {row.get('compile_cache')}: "
                    f"{break_even_text(steps, low, high, n, row.get('speedup_verdict') or 'inconclusive')}"
                    f" (run {row['run_id']})")
    return "; torch.compile on this testbed for the same work: " + "; ".join(said)
