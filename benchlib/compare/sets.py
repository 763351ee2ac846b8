"""What `benchlib compare` puts side by side: result sets opened from a label or a folder
(the newest set when a folder holds several), their rows matched by table and parameters
(where the data lives left out), each row's values per launch, and what differs between
the two sets' environments. See benchlib.compare.changes for the rules."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.compare import bmf
from benchlib.errors import UsageError
from benchlib.records import results

# Parameters that say where things are, not what is measured: left out of the match.
LOCATION_PARAMS = ("path", "val_path", "results_dir", "checkpoints_path", "train_dir")


# ------------------------------------------------------------------------ result sets

@dataclass
class ResultSet:
    label: str
    where: Path  # the results folder it was read from
    records: list[dict[str, Any]]  # its ok records
    note: str = ""  # how it was chosen, when that is not obvious

    def describe(self) -> str:
        beds = sorted({r["testbed"]["name"] for r in self.records})
        when = sorted(r["finished_at"][:10] for r in self.records)
        span = when[0] if when[0] == when[-1] else f"{when[0]}..{when[-1]}"
        return (f"{self.label} ({len(self.records)} ok records on {', '.join(beds)}, "
                f"{span}){self.note}")


def set_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The result sets among `records`, newest first: label, records, ok, testbeds, last."""
    sets: dict[str, dict[str, Any]] = {}
    for r in records:
        s = sets.setdefault(r["label"], {"label": r["label"], "records": 0, "ok": 0,
                                         "testbeds": set(), "last": ""})
        s["records"] += 1
        s["ok"] += r["status"] == "ok"
        s["testbeds"].add(r["testbed"]["name"])
        s["last"] = max(s["last"], r["finished_at"])
    return sorted(sets.values(), key=lambda s: s["last"], reverse=True)


def labels_line(records: list[dict[str, Any]]) -> str:
    sets = set_summary(records)
    if not sets:
        return "there are no records"
    return "result sets here: " + ", ".join(f"{s['label']} ({s['ok']} ok)" for s in sets)


class Reader:
    """Each results folder read once (a broken file is warned about once)."""

    def __init__(self):
        self.cache: dict[Path, list[dict[str, Any]]] = {}

    def __call__(self, folder: Path) -> list[dict[str, Any]]:
        folder = Path(folder).resolve()
        if folder not in self.cache:
            self.cache[folder] = results.read_records(folder)
        return self.cache[folder]


def open_set(spec: str, results_dir: Path, read: Reader | None = None) -> ResultSet:
    """A label in `results_dir`, or a folder: an outputs folder (its results/) or a
    results folder, whose newest result set is taken when it holds several; or a BMF
    file `benchlib export` wrote (or its folder): one value per row and metric."""
    read = read or Reader()
    path = Path(spec).expanduser()
    if bmf.bmf_file(path):
        return ResultSet(*bmf.read(bmf.bmf_file(path)))
    if path.is_dir():
        folder = path / "results" if (path / "results").is_dir() else path
        records = read(folder)
        sets = set_summary(records)
        if not sets:
            raise UsageError(f"{spec}: no records in {folder}")
        note = (f" (newest of {len(sets)} result sets in {folder}; name one as a label with "
                f"--outputs {path})" if len(sets) > 1 else "")
        label = sets[0]["label"]
    else:
        folder = Path(results_dir)
        records = read(folder)
        label, note = spec, ""
        if not any(r["label"] == spec for r in records):
            raise UsageError(f"{spec}: no result set with that label in {folder}, and no such "
                             f"folder; {labels_line(records)}")
    chosen = [r for r in records if r["label"] == label and r["status"] == "ok"]
    if not chosen:
        raise UsageError(f"{spec}: result set {label} has no ok record")
    return ResultSet(label, folder.resolve(), chosen, note)


def default_pair(results_dir: Path) -> tuple[str, str] | None:
    """(base, new) labels when none are given: the newest set, and the newest older set
    that shares a row with it. None when no two sets share a row."""
    records = [r for r in results.read_records(results_dir) if r["status"] == "ok"]
    sets = [s["label"] for s in set_summary(records)]
    keys = {label: {row_key(r) for r in records if r["label"] == label} for label in sets}
    for i, new in enumerate(sets):
        for base in sets[i + 1:]:
            if keys[new] & keys[base]:
                return base, new
    return None


# ------------------------------------------------------------------------------- rows

def row_params(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record["params"].items() if k not in LOCATION_PARAMS}


def row_key(record: dict[str, Any]) -> str:
    """What a row is across testbeds: its table and parameters, wherever the data lives."""
    return json.dumps({"table": record["table"], "params": row_params(record)},
                      sort_keys=True, default=str)


def group_rows(records: list[dict[str, Any]], where: str) -> dict[str, list[dict[str, Any]]]:
    """row key -> the set's records of that row; a row from two testbeds is a UsageError."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(row_key(r), []).append(r)
    for key, recs in groups.items():
        beds = sorted({r["testbed"]["id"] for r in recs})
        if len(beds) > 1:
            raise UsageError(f"result set {where} holds row {recs[0]['table']} "
                             f"{json.dumps(row_params(recs[0]), sort_keys=True)} from "
                             f"{len(beds)} testbeds ({', '.join(beds)}): give each testbed "
                             "its own label")
    return groups


def describe_rows(records: list[dict[str, Any]]) -> dict[str, str]:
    """row key -> the parameters that tell the table's compared rows apart."""
    by_table: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        by_table.setdefault(r["table"], {})[row_key(r)] = row_params(r)
    out = {}
    for rows in by_table.values():
        names = sorted({k for p in rows.values() for k in p})
        varying = [n for n in names if len({repr(p.get(n)) for p in rows.values()}) > 1]
        for key, p in rows.items():
            out[key] = ", ".join(f"{n}={p.get(n)}" for n in varying) or "(one row)"
    return out


def per_repeat(record: dict[str, Any], metric: str) -> tuple[str, list[dict[str, Any]]]:
    """(where, items): the record's per-repeat items that all hold `metric`."""
    details = record.get("details") or {}
    for key in ("repeats", "epochs"):
        items = details.get(key)
        if isinstance(items, list) and items and all(isinstance(i, dict) and metric in i
                                                       for i in items):
            return key, items
    return "summary", [record["metrics"]] if metric in record["metrics"] else []


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def launches(record: dict[str, Any], metric: str) -> list[list[float]]:
    """The metric's values in the record, one list per launch: its per-repeat values
    (details.repeats, else details.epochs), else its one summary value. Epochs that name
    their `repeat` came from one launch each (notebook 30 launches every repeat)."""
    where, items = per_repeat(record, metric)
    groups: dict[Any, list[float]] = {}
    for item in items:
        launch = item.get("repeat", 0) if where == "epochs" else 0
        if _number(item[metric]):
            groups.setdefault(launch, []).append(float(item[metric]))
    return [g for g in groups.values() if g]


def values(record: dict[str, Any], metric: str) -> list[float]:
    """All of the record's values of `metric` (launches() flattened)."""
    return [v for g in launches(record, metric) for v in g]


# ------------------------------------------------------------------ environment diff

# per-job values that differ on every run and say nothing about the testbed
_NOISY_VARS = ("SLURM_", "MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE")


def environment(record: dict[str, Any]) -> dict[str, str]:
    """What a record says about where it ran, flat: the testbed's identity and hosts,
    then driver, OS, Python, threads, memory, package versions and set variables."""
    env = record.get("env") or {}
    bed = record["testbed"]
    flat: dict[str, Any] = {f"testbed {k}": v for k, v in bed["identity"].items()}
    flat["hosts"] = bed.get("hosts")
    flat.update({
        "gpus": ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or "none",
        "driver": env.get("nvidia_driver"), "os": env.get("os"), "kernel": env.get("kernel"),
        "python": env.get("python"), "cpus": env.get("cpu_logical"),
        "cpus usable": env.get("cpu_affinity"), "torch threads": env.get("torch_threads"),
        "memory": (f"{env['memory_bytes'] / 2**30:.0f} GiB" if env.get("memory_bytes")
                   else None),
        "method_version": record.get("method_version"),
    })
    for name, version in sorted((env.get("packages") or {}).items()):
        if name not in ("torch", "benchlib"):  # the testbed has them
            flat[f"package {name}"] = version
    for name, value in sorted((env.get("env_vars") or {}).items()):
        if not name.startswith(_NOISY_VARS):
            flat[f"${name}"] = value
    return {k: "-" if v is None else str(v) for k, v in flat.items()}


def env_diff(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(what, base, new) for everything that differs between the two sets' records (a set
    with several values shows them all)."""
    def values_of(records):
        out: dict[str, set[str]] = {}
        for r in records:
            for k, v in environment(r).items():
                out.setdefault(k, set()).add(v)
        return out

    b, n = values_of(base), values_of(new)
    diff = []
    for name in list(dict.fromkeys([*b, *n])):
        before, after = ", ".join(sorted(b.get(name, {"-"}))), ", ".join(sorted(n.get(name, {"-"})))
        if before != after:
            diff.append((name, before, after))
    return diff


# what a testbed's identity says of its software, the rest being its hardware
STACK_FIELDS = ("torch", "cuda", "cudnn", "nccl", "benchlib", "commit", "allocator")


def _one(records: list[dict[str, Any]], read) -> str:
    return ", ".join(sorted({str(read(r)) for r in records}))


def row_changes(b_rows: dict[str, list[dict[str, Any]]], n_rows: dict[str, list[dict[str, Any]]],
                names: dict[str, str]) -> list[str]:
    """For each row both sets have (paired by row, as the table's rows are: its table and
    parameters, whatever its run id), a sentence when its model changed (the identity hash
    `model_source_sha` differs: the builder's or the model class's source, model_args, a
    model library's version) and one when its stack changed (torch, CUDA, cuDNN, NCCL,
    benchlib, commit or allocator differ between the testbeds): a difference in the row
    may be the model's, the stack's, or both."""
    out = []
    for key in sorted(set(b_rows) & set(n_rows)):
        b, n = b_rows[key], n_rows[key]
        where = f"{b[0]['table']} {names.get(key, '')}".strip()
        model = (n[0].get("params") or {}).get("model") or \
            (n[0].get("metrics") or {}).get("model_class")

        def sha(r: dict[str, Any]) -> Any:
            return (r.get("metrics") or {}).get("model_source_sha")
        before, after = _one(b, sha), _one(n, sha)
        older = not all((r.get("metrics") or {}).get("model_source") for r in b + n)
        if all(map(sha, b + n)) and before != after and older:
            out.append(f"model identity of {where} ({model}) not compared: a record of it "
                       "predates the hash of builder, classes and model_args.")
        elif all(map(sha, b + n)) and before != after:
            covers = (n[-1].get("metrics") or {}).get("model_source") or "the model's source"
            out.append(f"model changed: {where} ({model}): its identity {before} -> {after} "
                       f"(hash of {covers}), so a difference there may be the model's, not "
                       "the stack's.")
        stack = [(f, _one(b, lambda r: r["testbed"]["identity"].get(f)),
                  _one(n, lambda r: r["testbed"]["identity"].get(f))) for f in STACK_FIELDS]
        moved = [f"{f} {x} -> {y}" for f, x, y in stack if x != y]
        if moved:
            out.append(f"stack changed: {where} ({model}): {'; '.join(moved)}.")
    return out


# ------------------------------------------------------------------------ node health

def _health(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest `doctor --health` figures among a set's records (its testbed's), or None."""
    found = [r for r in records if (r.get("testbed") or {}).get("health")]
    return max(found, key=lambda r: r["finished_at"])["testbed"]["health"] if found else None


def health_changes(base: ResultSet, new: ResultSet, threshold: float) -> list[str]:
    """A sentence for each device (by host and rank) and node pair whose `doctor --health`
    figure is more than `threshold` lower in NEW than in BASE: a regression that came with
    a slower node says so. Nothing when either set has no such record."""
    b, n = _health(base.records), _health(new.records)
    if not b or not n:
        return []
    out = []
    before = {(d["host"], d["rank"]): d["tflops"] for d in b.get("devices") or []}
    for d in n.get("devices") or []:
        old = before.get((d["host"], d["rank"]))
        if old and d["tflops"] < old * (1 - threshold):
            out.append(f"health: rank {d['rank']}'s device on {d['host']} ({d['device']}) is "
                       f"{1 - d['tflops'] / old:.0%} slower than in {base.label} "
                       f"({d['tflops']:.3g} against {old:.3g} TFLOP/s).")
    pairs = {tuple(p["hosts"]): p["busbw_gbps"] for p in b.get("pairs") or []}
    for p in n.get("pairs") or []:
        old = pairs.get(tuple(p["hosts"]))
        if old and p["busbw_gbps"] < old * (1 - threshold):
            out.append(f"health: the all-reduce between {p['hosts'][0]} and {p['hosts'][1]} is "
                       f"{1 - p['busbw_gbps'] / old:.0%} slower than in {base.label} (busbw "
                       f"{p['busbw_gbps']:.3g} against {old:.3g} GB/s).")
    return out
