"""Data sets as shards, the form most training data that does not fit in memory takes on
an object store: written as WebDataset tar, LitData chunks and Mosaic MDS (write), read
through each library's own reader with its own worker splitting and shuffling (read),
and timed per DataLoader worker and per batch (timing: each worker's start-up and item
time, the batch waits, the stalls)."""

FORMATS = ("wds", "litdata", "mds")  # the IO study's shard variants, by library
