"""Worked examples of a model and a data set of your own (docs/own-model.md)."""
