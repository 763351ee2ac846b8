"""Comparing two result sets: matching their rows, a verdict per row and metric, what changed between their testbeds."""
