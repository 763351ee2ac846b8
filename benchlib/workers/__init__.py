"""Entry points the launchers start: `python -m benchlib.workers.<name>`.

single, dp, ddp    the trainers of notebook 20 (seed 002)
allreduce          all-reduce bus bandwidth over message sizes
doctor             seed 004's two-rank toy test: init, a checked all_reduce, latency
"""
