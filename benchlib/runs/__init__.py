"""Running rows: parameter tables checked into rows, sweeps run locally through papermill kernels or as Slurm job arrays."""
