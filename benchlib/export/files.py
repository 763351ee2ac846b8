"""The files an export writes: its folder made and tried before anything is written, each
document checked against its published schema (`schemas/`), and every file written whole
and atomically, so that exporting again rewrites the same bytes and a reader never sees
half of one."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

from benchlib import atomic
from benchlib.errors import BenchlibError, UsageError

SCHEMAS = Path(__file__).parent / "schemas"


def writable_folder(folder: Path) -> Path:
    """`folder`, made if absent and tried with a temporary file; UsageError naming --out
    when it cannot be written there (a file in its place, no permission, read-only)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".benchlib-export-"):
            pass
    except OSError as e:
        raise UsageError(f"out: {folder} cannot be written ({e.strerror or e}); give --out a "
                         "folder you can write") from e
    return folder


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """A published schema by file name (`bmf.json`, `github-action-benchmark.json`)."""
    return json.loads((SCHEMAS / name).read_text())


def check(document: Any, schema_name: str) -> None:
    """BenchlibError with the first violation when `document` breaks the schema: a
    file that the tool would refuse is never written."""
    import jsonschema

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft7Validator(schema(schema_name)).iter_errors(document))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "the document"
        raise BenchlibError(f"export: {where} breaks {schema_name}: {error.message}")


def text(document: Any) -> str:
    """The JSON text every export file is written as (sorted keys: the same document,
    the same bytes)."""
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_all(files: dict[Path, str]) -> list[Path]:
    """Each file written whole and atomically, in order (each checked before: call this
    once everything is built)."""
    return [atomic.write_text(path, content) for path, content in files.items()]
