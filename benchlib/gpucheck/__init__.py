"""The GPU check: every GPU path of the workbook on one GPU machine in one call (its
steps, records and summary)."""
