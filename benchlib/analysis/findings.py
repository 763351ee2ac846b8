"""Each study's finding and notebook 90's sections, from the study's own analysis module.

A study's analysis module (its registry entry's `analysis`) computes, from one frame (the
newest ok record of each row on each testbed: `Records.df`):

    runs(df)          its rows, with what is derived from them (speedup, variant, ...)
    headline(runs)    (claims, caveat): the first claim answers the study's question
    figure(records)   its main figure, or None: notebook 90 shows it, the report's landing
                      page shows it small beside the finding
    section(records)  notebook 90's section body: tables, figures and sentences

Notebook 90's findings (`summary`), its sections (`heading`, `figure`, `body`) and the report's landing
page (benchlib.report.landing) all go through `headline` and `figure` here, over the
same selection, so the two say the same and draw the same.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pandas as pd

from benchlib.analysis.claims import Claim, value
from benchlib.analysis.sections import Records, show
from benchlib.config import studies

Headline = tuple[list[Claim], str]  # the claims (the first is the headline) and a caveat


def module(study: studies.Study) -> ModuleType | None:
    """The study's analysis module, or None for one without (notebooks 90 and 95)."""
    return importlib.import_module(study.analysis) if study.analysis else None


def of_study(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows of one study (by the record's `study`), every column as the frame has it."""
    if df.empty or "study" not in df:
        return df.iloc[0:0]
    return df[df["study"] == name]


def headline(study: studies.Study, df: pd.DataFrame) -> Headline:
    """The headline of one study's ok runs on one testbed (rows of `df` of that study; the
    frame may hold other studies' rows and columns). A study whose module gives no claim
    says why as its one claim."""
    mod = module(study)
    rows = of_study(df, study.name).sort_values("finished_at", kind="stable")
    if mod is None or not hasattr(mod, "headline"):
        return [Claim(ok_runs(len(rows)), note=f"no headline figure is defined for "
                      f"{study.notebook}")], ""
    claims, caveat = mod.headline(mod.runs(rows))
    if not claims:
        return [Claim(ok_runs(len(rows)), note="none of them reported the figure this "
                      "study is summarised by")], caveat
    return claims, caveat


def ok_runs(n: int) -> str:
    """'1 ok run', '3 ok runs'."""
    return f"{n} ok run{'' if n == 1 else 's'}"


def sentence(claims: list[Claim], caveat: str) -> str:
    """A headline as one line of text: the first claim, "Also:" the others, the caveat."""
    body = claims[0].text() + "."
    if len(claims) > 1:
        body += " Also: " + "; ".join(c.text() for c in claims[1:]) + "."
    return body + (" " + caveat if caveat else "")


def by_testbed(df: pd.DataFrame) -> list[tuple[studies.Study, str, pd.DataFrame]]:
    """(study, testbed name, its rows) for every analysed study with rows, in reading
    order, then by testbed in order of first use."""
    out = []
    for study in studies.analysed():
        rows = of_study(df, study.name)
        if rows.empty:
            continue
        beds = rows["testbed_id"].fillna("") if "testbed_id" in rows else \
            pd.Series("", index=rows.index)
        for bed in dict.fromkeys(beds.loc[rows.sort_values("started_at").index]):
            one = rows[beds == bed]
            out.append((study, value(one.iloc[0], "testbed") or "", one))
    return out


def summary(records: Records) -> str:
    """Notebook 90's findings, in Markdown: one line per study and testbed, each the
    sentence the report's landing page gives for the same runs."""
    if records.df.empty:
        return "No ok run yet, so no findings."
    lines = []
    for study, bed, rows in by_testbed(records.df):
        where = f" (testbed {bed})" if bed else ""
        try:
            said = sentence(*headline(study, rows))
        except Exception as exc:  # noqa: BLE001 - one study's failure leaves the others' lines
            why = " ".join(f"{type(exc).__name__}: {exc}".split())
            said = f"its headline could not be computed from these records ({why})."
        lines.append(f"- **{study.name}**{where}: *{study.question}* {said}")
    return "\n".join(lines)


def anchor(study: studies.Study) -> str:
    """The id of the study's section on the analysis page."""
    return f"study-{study.name}"


def figure(study: studies.Study, records: Records) -> Any:
    """The study's main figure from these records, or None (none defined, no rows)."""
    mod = module(study)
    if mod is None or not hasattr(mod, "figure") or of_study(records.df, study.name).empty:
        return None
    return mod.figure(records)


def heading(study: studies.Study) -> str:
    """The heading of the study's section of notebook 90, with the anchor the report's
    landing page links to, and what the section shows."""
    number = study.notebook.partition("_")[0]
    about = getattr(module(study), "ABOUT", "")
    return (f'<a id="{anchor(study)}"></a>\n\n## {study.name}: {study.question} '
            f"(notebook {number})" + (f"\n\n{about}" if about else ""))


def body(study: studies.Study, records: Records):
    """The rest of the study's section: its tables, other figures and sentences."""
    if of_study(records.df, study.name).empty:
        return f"No ok run of {study.name} yet ({study.notebook})."
    return module(study).section(records)


def show_study(study: studies.Study, records: Records) -> None:
    """One study's section of notebook 90: its heading, its main figure, then its tables
    and sentences, each part shown on its own (sections.show), so that one that cannot be
    computed leaves the others standing."""
    show(heading, study)
    show(figure, study, records)
    show(body, study, records)
