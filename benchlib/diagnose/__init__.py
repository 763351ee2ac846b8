"""What holds a run back: the bottleneck with its evidence and advice (`rules`), the
figures it judges with their spread (`figures`) and the lines that show them (`evidence`),
and Holistic Trace Analysis over a run's Kineto traces as evidence (`traces`)."""
