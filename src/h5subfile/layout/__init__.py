"""Pure decomposition logic: no MPI, no I/O. Most unit tests live here.

Decomposition (blocks, grouping, extents, selections, chunks, two-phase plans), the records
written into the master and their checks, names of files and datasets, and what each rank is
sent of a file's layouts. The one exception to "no I/O": ``names.resolve_inside`` asks the file
system where symbolic links lead.
"""
