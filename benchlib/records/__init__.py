"""The records store: one JSON record per run (written atomically, read back checked),
result sets and testbeds."""
