"""Comparing two result sets: matching their rows, a verdict per row and metric, and
what changed between their testbeds."""
