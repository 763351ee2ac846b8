"""Who a process is and where it trains: rank and world from torchrun, Slurm, a
platform's per-node variables or tcp:// (env), the device and backend (device), and the
process group (group)."""
