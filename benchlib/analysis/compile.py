"""The compile study (notebook 55): after how many steps does torch.compile pay off, cold
and warm, for this model, and does it change the loss? Its table, headline, main figure
(time against steps, eager and each mode) and notebook 90's section, all from `runs()`;
the figure of one row's own launches for notebook 55 (`launch_figure`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from benchlib.analysis.claims import Claim, Figure, fmt, metric, rows, value
from benchlib.analysis.common import ok_runs, speed_kept, with_columns
from benchlib.analysis.sides import compare, side
from benchlib.config import studies
from benchlib.config.performance import compile_mode
from benchlib.core.compile_cost import break_even_text
from benchlib.studies.compile import break_even_of

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("Per model and compile mode, cold and warm: the compile's seconds (the first steps "
         "less eager's), the steady step against eager's with its interval, the steps after "
         "which compiling pays off, graph breaks and recompiles, peak memory, and the loss "
         "after the run's steps against eager's on the same seeds.")
# the same work: one model on the same data and batch, in one precision, on the same hardware
SAME_WORK = ["model", "model_args", "dataset", "image_size", "seq_len", "batch_size",
             "precision", "hardware"]
CONFIG = ["mode", "compile_cache"]


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 55, with `mode` (an old record's compile: true is default)."""
    runs = speed_kept(ok_runs(df, STUDY, ("batch_size", "repeats", "first_steps", "break_even_n")))
    if runs.empty:
        return runs
    runs = with_columns(runs, [*SAME_WORK, "compile", "compile_cache", "cold_compile_s"])
    runs["mode"] = runs["compile"].map(compile_mode)
    # inf (never pays off) as a number again: a record stores it as null
    found = [break_even_of(r.to_dict()) for r in rows(runs)]
    for i, col in enumerate(("steps_to_pay_off", "pays_off_low", "pays_off_high")):
        runs[col] = [f[i] for f in found]
    return runs


def name(run: pd.Series) -> str:
    """'default, cold' / 'regional, warm'."""
    return f"{run['mode']}, {run['compile_cache']}"


def pays_off(run: pd.Series) -> str:
    """The row's break-even as a phrase (core.compile_cost.break_even_text), a direction
    only where the speedup's verdict names one."""
    return break_even_text(run["steps_to_pay_off"], run["pays_off_low"], run["pays_off_high"],
                           int(metric(run, "break_even_n") or 0),
                           value(run, "speedup_verdict") or "inconclusive")


def table(runs: pd.DataFrame) -> pd.DataFrame:
    cols = ["model", "batch_size", *CONFIG, "compile_s", "compile_s_p10", "compile_s_p90",
            "cold_compile_s", "eager_step_ms", "step_ms", "speedup", "speedup_ci95_low",
            "speedup_ci95_high", "speedup_verdict", "pays off", "peak_mem_ratio",
            "loss_parity", "graph_breaks", "recompiles"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    shown = runs.assign(eager_step_ms=runs["eager_step_s"] * 1e3, step_ms=runs["step_s"] * 1e3,
                        **{"pays off": [pays_off(r) for r in rows(runs)]})
    return shown.reindex(columns=cols).sort_values(["model", *CONFIG]).round(3) \
        .reset_index(drop=True)


def headline(runs: pd.DataFrame) -> tuple[list[Claim], str]:
    """Per row: the steps after which compiling pays off, its interval and n in the
    figure; the compile's seconds, the steady speedup and its verdict, the loss's parity
    and the graph breaks in the note."""
    claims = []
    for run in rows(runs.sort_values(["model", *CONFIG], kind="stable")):
        steps, low, high = run["steps_to_pay_off"], run["pays_off_low"], run["pays_off_high"]
        if value(run, "compile_s") is None:
            continue
        n = int(metric(run, "break_even_n") or 0)
        verdict = value(run, "speedup_verdict") or "inconclusive"
        spread = (f"95% CI {_count(low)} to {_count(high)}, " if _known(low) and
                  math.isfinite(low) else "") + f"n={n} launch{'' if n == 1 else 'es'} a side"
        if verdict == "faster" and math.isfinite(steps):
            figure = Figure(fmt(max(steps, 1.0)), "steps to pay off", None, spread,
                            [("", run["run_id"])])
        elif verdict in ("slower", "no change"):
            figure = Figure("never", f"(the compiled step is not faster: {verdict})", None,
                            f"n={n} launch{'' if n == 1 else 'es'} a side", [("", run["run_id"])])
        else:  # no direction: the range the launches allow, never a point
            figure = Figure("not settled", f"({_count(low)} steps to {_count(high)})"
                            if _known(low) else "(too few launches for an interval)", None,
                            spread, [("", run["run_id"])])
        speed = metric(run, "speedup")
        note = "; ".join(filter(None, [
            f"compile {metric(run, 'compile_s'):.1f} s",
            f"steady x{speed:.2f} over eager ({value(run, 'speedup_verdict')})" if speed else "",
            f"loss {value(run, 'loss_parity')}",
            f"{int(metric(run, 'graph_breaks') or 0)} graph break(s)"]))
        data = f" on {value(run, 'dataset')}" if value(run, "dataset") else ""
        work = (f"{value(run, 'model')}{data}, batch {value(run, 'batch_size')}, "
                f"{value(run, 'precision')}, on {value(run, 'device_name') or value(run, 'device')}")
        claims.append(Claim(f"compile {name(run)}, {work}", figure, note))
    differs = runs[runs["loss_parity"] == "differs"] if "loss_parity" in runs else runs.iloc[:0]
    caveat = (f"In {len(differs)} row(s) the compiled loss after the same steps, on the same "
              "seed, is more than the stated tolerance from eager's: read those speedups with "
              "that in mind."
              if len(differs) else "")
    return claims, caveat


def _count(v: float | None) -> str:
    return "?" if not _known(v) else "never" if math.isinf(v) else f"{v:,.0f}"


def _known(v: Any) -> bool:
    return v is not None and v == v  # None and NaN: no interval


def curve(first_s: float, step_s: float, first_steps: int, steps: Any) -> Any:
    """Seconds spent after N steps: the first steps as measured, then steady steps."""
    import numpy as np

    n = np.asarray(steps, dtype=float)
    return np.where(n <= first_steps, first_s * n / max(first_steps, 1),
                    first_s + (n - first_steps) * step_s)


def horizon(group: pd.DataFrame) -> float:
    """How far the time-against-steps figure reaches: past every finite break-even (its
    upper bound too, where finite), and ten times the run's own steps (where a compile
    never pays off, far enough for the lines to part)."""
    ends = [10 * (metric(r, "loss_steps") or 0) for r in rows(group)]
    for r in rows(group):
        first = metric(r, "first_steps") or 0
        for key in ("steps_to_pay_off", "pays_off_high"):
            v = r[key]
            if _known(v) and math.isfinite(v):
                ends.append(1.2 * (first + v))
    return max(ends + [10.0])


def plot(runs: pd.DataFrame):
    """Time against steps for each work: eager, and each mode, cold and warm, from the
    medians of their launches; a dot where compiling has paid for itself."""
    import matplotlib.pyplot as plt
    import numpy as np

    groups = list(runs.groupby(["model", "batch_size"], dropna=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(5.2 * len(groups), 3.8), squeeze=False)
    for ax, ((model, batch), group) in zip(axes[0], groups):
        steps = np.linspace(0, horizon(group), 400)
        # eager: the median of the rows' own eager launches (each row's dot is against its own)
        ax.plot(steps, curve(group["eager_first_steps_s"].median(), group["eager_step_s"].median(),
                             int(group["first_steps"].max()), steps), color="black", lw=2,
                label="eager")
        for r in rows(group.sort_values(CONFIG)):
            w = int(r["first_steps"])
            line, = ax.plot(steps, curve(r["first_steps_s"], r["step_s"], w, steps),
                            ls="--" if r["compile_cache"] == "warm" else "-", label=name(r))
            be = r["steps_to_pay_off"]
            if math.isfinite(be):
                at = w + be
                ax.plot([at], curve(r["first_steps_s"], r["step_s"], w, [at]), "o",
                        color=line.get_color())
        ax.set(xlabel="steps", ylabel="time spent (s)", title=f"{model}, batch {int(batch)}")
        ax.legend(fontsize=8)
    fig.suptitle("Time against steps (dot: compiling has paid off)")
    fig.tight_layout()
    return fig


def launch_figure(details: dict[str, Any], title: str = ""):
    """One row's own launches (notebook 55): each launch's time against its steps, eager
    and compiled, so the compile's first steps and the steady slopes show as measured."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 3.8))
    sides = [("eager", details.get("eager_launches") or [], "black"),
             ("compiled", details.get("launches") or [], "#dd8452")]
    if details.get("priming"):
        sides.append(("priming (cold)", [details["priming"]], "#c44e52"))
    for label, launches, color in sides:
        for i, launch in enumerate(launches):
            spent = np.cumsum(launch["steps_s"])
            ax.plot(np.arange(1, len(spent) + 1), spent, color=color, alpha=0.7,
                    label=label if i == 0 else None)
    ax.set(xlabel="steps", ylabel="time spent (s)", yscale="symlog",
           title=title or "Each launch's time against its steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _launch_side(name: str, launches: pd.DataFrame, run_id: str, col: str):
    """A side of one row from its launches (`details.launches` or `eager_launches`, one
    value each): what sides.compare judges by the verdict rule."""
    mine = launches[launches["run_id"] == run_id] if "run_id" in launches else launches.iloc[:0]
    return side(name, mine, col=col, within="launches")


def conclusions(runs: pd.DataFrame, launches: pd.DataFrame, eager: pd.DataFrame) -> str:
    """Per work and row: when it pays off, what the compile cost (and warm against cold
    of the same mode, by the verdict rule over their launches), compiled against eager by
    the verdict rule, the loss and the peak memory. `launches`, `eager`: the records'
    compiled and eager launches (Records.details)."""
    if runs.empty:
        return "No compile runs yet (notebook 55)."
    parts = []
    for _, group in runs.groupby(SAME_WORK, dropna=False):
        first = group.iloc[0]
        head = f"{value(first, 'model')}, batch {value(first, 'batch_size')}, " \
               f"{value(first, 'precision')}"
        for r in rows(group.sort_values(CONFIG)):
            speed = compare(_launch_side(f"compiled ({r['mode']})", launches, r["run_id"],
                                         "samples_per_s"),
                            _launch_side("eager", eager, r["run_id"], "samples_per_s"))
            memory = f", peak memory {r['peak_mem_ratio']:.2f}x eager's" \
                if metric(r, "peak_mem_ratio") else ""
            parts.append(f"- {head}, compile {name(r)}: {pays_off(r)}; compile "
                         f"{r['compile_s']:.1f} s (p10-p90 {r['compile_s_p10']:.1f}-"
                         f"{r['compile_s_p90']:.1f}); steady samples/s {speed}; the loss after "
                         f"{value(r, 'loss_steps')} steps: {value(r, 'loss_parity')}{memory}.")
        for mode, same in group.groupby("mode"):
            cold, warm = same[same["compile_cache"] == "cold"], same[same["compile_cache"] == "warm"]
            if not cold.empty and not warm.empty:
                text = compare(_launch_side("warm", launches, warm.iloc[0]["run_id"], "compile_s"),
                               _launch_side("cold", launches, cold.iloc[0]["run_id"], "compile_s"),
                               higher_is_better=False)
                parts.append(f"- {head}, compile {mode}, compile seconds: {text}.")
    return "\n".join(parts)


def graph_break_lines(breaks: pd.DataFrame) -> str:
    """Each graph break the records name (Records.details("graph_break_reasons")): its
    reason, file, line and code, per model."""
    breaks = breaks[breaks["study"] == STUDY] if "study" in breaks else breaks
    if breaks.empty:
        return "No graph break in any compiled model's forward."
    lines = []
    for (model, mode), group in breaks.groupby(["model", "compile"], dropna=False):
        found = group.drop_duplicates(["file", "line", "reason"])
        where = "; ".join(f"{b.reason} at {b.file}:{b.line} (`{b.code}`)"
                          for b in found.itertuples())
        lines.append(f"- {model} (compile {compile_mode(mode)}): {len(found)} graph break(s) "
                     f"in its forward: {where}.")
    return "\n".join(lines)


def figure(records: Records):
    compiled = runs(records.df)
    return plot(compiled) if not compiled.empty else None


def section(records: Records):
    compiled = runs(records.df)
    yield table(compiled)
    yield conclusions(compiled, records.details("launches"), records.details("eager_launches"))
    yield graph_break_lines(records.details("graph_break_reasons"))
