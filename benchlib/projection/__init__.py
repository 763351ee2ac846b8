"""The scaling projection: a model of throughput on N devices x M nodes from one node's
figures (`model`), its inputs resolved from numbers, records or seed 003's fit (`inputs`),
and its checks against published rows (`check`, `check_fsdp`)."""
