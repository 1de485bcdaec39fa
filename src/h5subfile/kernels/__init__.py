"""The seed paper's I/O kernels, built on the public API only.

Every collective of the kernels is polled (``collective.barrier``, ``allreduce``,
``allgather_array``): MPI's blocking ones spin, and with more ranks than cores the spinning
ranks took the CPU from the ranks at work, and their spread counted as metadata time.
"""
