"""Data sets: preparing them (download where there is network, generate the same on-disk
format where not; prepare, generate), the manifest that says what is there (manifest),
opening them as the studies do (datasets), and the storage variants of the IO study
(storage)."""
