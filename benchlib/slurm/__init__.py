"""Slurm on the submitting side: rendering sbatch scripts (sbatch), what a partition
holds and whether a layout fits it (capacity), job arrays of sweep rows grouped by
allocation shape (arrays), and the client commands (commands)."""
