"""Records read back: where a row's record file is, one file read and checked (a version 1
record upgraded to the current schema on the way: testbed.upgrade_v1; parameters under a
name or value their study has since renamed read as now, `params_now`), every record under
a results folder, one row's records, whether the row is done, and the id its next record
takes. An unreadable file, or a record of the wrong shape (a field of the wrong type, a
testbed without an id, a schema newer than this benchlib's), is skipped with one warning
naming it and why: everything that reads records (load_results, compare, the report, a
sweep deciding what to run) reads them here.

    outputs/results/<table>/<run_id>.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchlib.config import CONFIGS, studies
from benchlib.errors import ConfigError, UnreadableRecord
from benchlib.records import testbed

# 2: every record has a testbed and a result-set label (version 1 records get them on
# reading, derived from their env: testbed.upgrade_v1)
# 3: `study` names the study (config/studies.py: single_device_io) and `table` the parameter
# table its row came from (io_workers), whose folder holds it; a version 2 record's `study`
# was its table (upgrade_v2)
SCHEMA_VERSION = 3
STATUSES = ("ok", "failed")
# what every record holds (results.write_record checks it on the way in too)
REQUIRED = ("schema_version", "run_id", "study", "notebook", "params", "env", "method_version",
            "started_at", "finished_at", "status", "error", "metrics", "executed_notebook")
# the fields' types: text, a mapping, or either of those or null
_TEXT = ("run_id", "study", "notebook", "method_version", "started_at", "finished_at")
_MAPPING = ("params", "env", "metrics")
_MAPPING_OR_NULL = ("error", "details", "executor", "host_load", "params_raw")
_TYPE_NAMES = {dict: "a mapping", list: "a list", str: "text", bool: "true or false",
               type(None): "null"}


def record_path(results_dir: Path, table: str, run_id: str) -> Path:
    return Path(results_dir) / table / f"{run_id}.json"


def read_record(path: Path) -> dict[str, Any]:
    """One record file, checked: UnreadableRecord names the file and what is wrong."""
    try:
        record = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise UnreadableRecord(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from e
    except (OSError, UnicodeDecodeError) as e:
        raise UnreadableRecord(f"{path}: cannot be read ({e})") from e
    missing = [k for k in REQUIRED if k not in record] if isinstance(record, dict) else REQUIRED
    if missing:
        raise UnreadableRecord(f"{path}: not a benchlib record (no {', '.join(missing)})")
    why = _wrong_shape(record)
    if why:
        raise UnreadableRecord(f"{path}: {why}")
    if record["schema_version"] == 1:
        record = testbed.upgrade_v1(record)
    return params_now(upgrade_v2(record) if record["schema_version"] == 2 else record)


def params_now(record: dict[str, Any]) -> dict[str, Any]:
    """A record whose parameters hold a name or value its study's config has renamed since
    (`StudyConfig.renamed`, `old_values`: notebook 40's `arch`, `compile: true`), with them
    read as a row of a table is now, and what it held kept as `params_raw`: a record
    written before the rename is the same row as one written after, for `latest_ok`,
    `compare` and the analysis. Any other record as it is."""
    entry = studies.of_notebook_entry(record["notebook"])
    config = CONFIGS.get(entry.config.rpartition(":")[2]) if entry and entry.config else None
    if config is None or not (config.renamed_fields() or config.old_field_values()):
        return record
    try:
        params, changed = config.read_old_names(record["params"])
    except ConfigError:  # an old name beside its new one: no reading of it is sure
        return record
    if not changed:
        return record
    return {**record, "params": params, "params_raw": record.get("params_raw") or record["params"]}


def upgrade_v2(record: dict[str, Any]) -> dict[str, Any]:
    """A version 2 record as a version 3 one: its `study` was the name of its table; the
    study is now the one its notebook belongs to."""
    return {**record, "schema_version": 3, "table": record["study"],
            "study": studies.of_notebook(record["notebook"])}


def _type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), "a number" if isinstance(value, (int, float))
                           else type(value).__name__)


def _wrong_shape(record: dict[str, Any]) -> str | None:
    """What makes a record with every field unusable, or None: what every reader of
    records relies on (mappings where they are read as mappings, a testbed with an id,
    name and identity, a schema this benchlib knows)."""
    version = record["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return f"schema_version {version!r} is not a version number"
    if version > SCHEMA_VERSION:
        return (f"schema_version {version} is newer than this benchlib reads "
                f"({SCHEMA_VERSION}); update benchlib to read it")
    for key in _TEXT:
        if not isinstance(record[key], str):
            return f"{key} is {_type_name(record[key])}, not text"
    for key in _MAPPING:
        if not isinstance(record[key], dict):
            return f"{key} is {_type_name(record[key])}, not a mapping"
    for key in _MAPPING_OR_NULL:
        if not isinstance(record.get(key), (dict, type(None))):
            return f"{key} is {_type_name(record[key])}, not a mapping"
    if record["status"] not in STATUSES:
        return f"status {record['status']!r} is not one of {', '.join(STATUSES)}"
    if not isinstance(record["executed_notebook"], (str, type(None))):
        return f"executed_notebook is {_type_name(record['executed_notebook'])}, not text"
    if version == 1:
        return None  # its testbed and label are made from its env
    missing = [k for k in ("testbed", "label") if k not in record]
    if missing:
        return f"a version {version} record without {', '.join(missing)}"
    bed = record["testbed"]
    if not isinstance(bed, dict):
        return f"testbed is {_type_name(bed)}, not a mapping"
    for key in ("id", "name"):
        if not isinstance(bed.get(key), str) or not bed[key]:
            return f"testbed has no {key}"
    if not isinstance(bed.get("identity"), dict):
        return "testbed has no identity"
    if not isinstance(record["label"], str) or not record["label"]:
        return f"label is {_type_name(record['label'])}, not text"
    if version >= 3 and not (isinstance(record.get("table"), str) and record["table"]):
        return f"a version {version} record without table (text)"
    return None


_WARNED: set[str] = set()  # a process says each unreadable file once, however often it reads it


def _warn_skipped(error: UnreadableRecord) -> None:
    """One warning per unreadable file and process: `benchlib report` reads the records
    for its pages, its findings and its comparison, and said each one three times."""
    if str(error) not in _WARNED:
        _WARNED.add(str(error))
        print(f"benchlib: skipped {error}", file=sys.stderr)


def find_record(results_dir: Path, table: str, run_id: str,
                label: str | None = None) -> dict[str, Any] | None:
    """The row's newest record (of result set `label`, if given), or None; an unreadable
    one counts as none (the row runs again and its new record replaces the broken file),
    with a warning."""
    records = [r for r in row_records(results_dir, table, run_id)
               if label is None or r["label"] == label]
    return max(records, key=lambda r: r["finished_at"]) if records else None


def row_records(results_dir: Path, table: str, run_id: str) -> list[dict[str, Any]]:
    """Every readable record of one row on one testbed: `<run_id>.json`, and the
    `<run_id>-<n>.json` that reruns (--force, another result set) added beside it."""
    first = record_path(results_dir, table, run_id)
    found = []
    for path in [first, *sorted(first.parent.glob(f"{run_id}-*.json"))]:
        if path.exists():
            try:
                found.append(read_record(path))
            except UnreadableRecord as e:
                _warn_skipped(e)
    return found


def has_ok_record(results_dir: Path, table: str, run_id: str, label: str | None = None) -> bool:
    """Whether the row is done on this testbed: an ok record (in result set `label`, or
    in any set when None)."""
    return any(r["status"] == "ok" and (label is None or r["label"] == label)
               for r in row_records(results_dir, table, run_id))


def free_run_id(results_dir: Path, table: str, run_id: str, label: str) -> str:
    """The id a new record of this row takes: `run_id`, else `run_id-2`, `-3`, ...: the
    first whose file is absent, unreadable, or a failed record of the same result set
    (which the new one replaces). An ok record, or another set's, is never replaced, nor
    are its executed notebook and logs (named by the same id)."""
    n = 1
    while True:
        candidate = run_id if n == 1 else f"{run_id}-{n}"
        path = record_path(results_dir, table, candidate)
        if not path.exists():
            return candidate
        try:
            existing = read_record(path)
        except UnreadableRecord:
            return candidate
        if existing["status"] != "ok" and existing["label"] == label:
            return candidate
        n += 1


def read_records(results_dir: Path) -> list[dict[str, Any]]:
    """Every readable record under `results_dir`; an unreadable file is skipped with one
    warning naming it and why, and the rest are read."""
    records = []
    for path in record_files(results_dir):
        try:
            records.append(read_record(path))
        except UnreadableRecord as e:
            _warn_skipped(e)
    return records


def record_files(results_dir: Path) -> list[Path]:
    """Every record under `results_dir` (temporary files start with a dot and are skipped)."""
    return sorted(p for p in Path(results_dir).glob("*/*.json") if not p.name.startswith("."))
