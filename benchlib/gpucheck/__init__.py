"""The GPU check: every GPU path of the workbook on one GPU machine in six calls (its
steps a table, plan.yaml; their figures, targets, records and summary)."""
