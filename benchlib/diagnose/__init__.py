"""What holds a run back: the bottleneck with its evidence and advice (`rules`), and
Holistic Trace Analysis over a run's Kineto traces as evidence (`traces`)."""
