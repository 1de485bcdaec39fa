"""The machinery behind the public facades (``files.py``): every collective protocol and every
byte moved.

- :mod:`.session`: an open file on one rank (state split by role: every rank, group leaders,
  rank 0) and :func:`~.session.open_session`.
- :mod:`.messages`: what ranks send each other, as frozen dataclasses.
- :mod:`.structure`: groups and attributes.
- :mod:`.create`: dataset creation (requests -> rank 0's plan -> leaders -> master).
- :mod:`.prepare`: the one validation of every write.
- :mod:`.transfer`: write dispatch: direct, two-phase; :mod:`.chunks`: the chunked transfer.
- :mod:`.exchange`: moving bytes between ranks (two-phase rounds, chunk parts).
- :mod:`.read`: reads, independent and collective.
- :mod:`.commit`: close (publish the master) and abandon.
"""
