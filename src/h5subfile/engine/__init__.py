"""The machinery behind the public facades (``files/``): every collective protocol and every
byte moved.

- :mod:`.session`: an open file on one rank (state split by role: every rank, group leaders,
  rank 0), :func:`~.session.open_session`, and the agreement round of every call;
  :mod:`.autoplan`: ``plan="auto"``.
- :mod:`.messages`: what ranks send each other, as frozen dataclasses.
- :mod:`.structure`: groups and attributes.
- :mod:`.create`: dataset creation (requests -> rank 0's plan -> leaders -> master);
  :mod:`.creation_plan`: rank 0's plan, pure.
- :mod:`.prepare`: the one validation of every write.
- :mod:`.transfer`: write dispatch: direct, two-phase; :mod:`.chunks`: the chunked transfer.
- :mod:`.exchange`: moving bytes between ranks (two-phase rounds, chunk parts).
- :mod:`.integrity`: checksums as bytes are written, recorded at close.
- :mod:`.learned` and :mod:`.learned_state`: datasets whose layout is learned from the writes;
  :mod:`.resize`: growing and shrinking them.
- :mod:`.read`: reads, independent and collective; :mod:`.verify`: checking a whole file.
- :mod:`.profiling`: profiled sessions.
- :mod:`.commit`: close and commit (publish the master).
"""
