"""The training loops the workers run: single/DP/DDP (ddp), Lightning (lightning), the
restartable elastic trainer (elastic) with its checkpoints (checkpoint). A trainer never
starts ranks itself and never reads a notebook: benchlib.workers gives it its rank."""
