"""A study of one's own, outside benchlib, for tests/test_report_site.py: one registry
entry (here, joined through BENCHLIB_STUDIES=toystudy), a config, a study module, an
analysis module and a notebook, and nothing else anywhere."""

from pathlib import Path

from benchlib.config.studies import Study

NOTEBOOK = Path(__file__).with_name("60_toy.ipynb")
STUDIES = (Study("toy", NOTEBOOK.name, "How many toys fit in the box?",
                 config="toystudy.config:ToyConfig", module="toystudy.study",
                 analysis="toystudy.analysis", preflight=False),)
