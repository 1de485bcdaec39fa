"""Pure decomposition logic: no MPI, no I/O. Most unit tests live here."""
