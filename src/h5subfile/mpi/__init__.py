"""Below the engine, the only package that imports mpi4py: polled rounds, collective checks,
node discovery.

- :mod:`.rounds`: one polled round of a non-blocking collective, with a timeout;
  :mod:`.slots`: pickled messages in fixed-size slots, under the object collectives.
- :mod:`.collective`: the agreement round and rank 0's protocols; :mod:`.failures`: failures
  as they travel between ranks.
- :mod:`.star` and :mod:`.doorbell`: rounds through one rank, whose waiting ranks sleep on a
  socket until rung, on a node with more ranks than cores only (docs/ARCHITECTURE.md,
  "mpi/ on oversubscribed nodes").
- :mod:`.nodes`: which node each rank runs on; :mod:`.launch`: the ``mpiexec`` to start jobs.
"""
