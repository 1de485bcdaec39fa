"""The only package that touches files (and, below the engine, the only one importing h5py).

- Positioned I/O: :mod:`.posix` (every data byte), :mod:`.pool` (a session's open files),
  :mod:`.writebehind` (writes in a background thread), :mod:`.boxes` (boxes of datasets to and
  from their stored bytes), :mod:`.regular` (regular files only), :mod:`.causes` (why a write
  failed).
- HDF5: :mod:`.h5` (h5py helpers), :mod:`.subfile` (a leader's subfile), :mod:`.master` (the
  master while written), :mod:`.master_read` (the master as readers scan it), :mod:`.filters`
  (compression).
- Around them: :mod:`.claim` (one writer at a time), :mod:`.filesystem` (which file system),
  :mod:`.tuning_profiles` (the tuner's saved plans), :mod:`.darshan_log` (Darshan logs).
"""
