import sys

# nbformat (papermill's, and benchlib's own notebook reading) imports jsonschema, whose
# format checks import rfc3987_syntax where it is installed (jupyter-events asks for it);
# rfc3987-syntax 1.1.0 compiles 39 Lark grammars as it is imported: 1.5 to 2 CPU seconds
# of every sweep, run, report and Slurm array task here (python-jsonschema/jsonschema#1392).
# No benchlib command checks an IRI's syntax, so this process goes without it: jsonschema
# then leaves the "iri" formats unchecked, as it does where the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)

from benchlib.cli import main  # noqa: E402

raise SystemExit(main())
