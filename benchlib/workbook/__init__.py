"""The machinery around the notebooks: parameter tables checked before anything runs
(params), the local sweep through papermill (sweep) and the Slurm one (slurm_sweep),
records, result sets and publishing a run's metrics (results), the HTML report (report)."""
