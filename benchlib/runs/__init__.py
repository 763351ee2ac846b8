"""Running rows: parameter tables checked into rows, swept locally through papermill
kernels or as Slurm job arrays."""
