"""The published report: the landing page with its findings, a page per run, the
analysis and compare pages, the zip."""
