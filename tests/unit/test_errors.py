"""The exception hierarchy: every h5subfile error is an H5SubfileError and also the built-in
users would catch. (That each is raised clearly and identically on every rank is tested in
tests/mpi/test_bad_input.py.)"""

from __future__ import annotations


def test_errors_subclass_builtins() -> None:
    import h5subfile as hs

    assert issubclass(hs.BlockError, ValueError)
    assert issubclass(hs.MissingFileError, FileNotFoundError)
    assert issubclass(hs.TruncatedFileError, OSError)
    assert issubclass(hs.ObjectNotFoundError, KeyError)
    assert issubclass(hs.SelectionError, IndexError)
    assert issubclass(hs.FileExistsH5SubfileError, FileExistsError)
    assert issubclass(hs.FileBusyError, BlockingIOError) and issubclass(hs.FileBusyError, OSError)
    assert issubclass(hs.RankIOError, OSError)
    assert issubclass(hs.RankFailedError, RuntimeError)


def test_every_error_class_is_exported() -> None:
    import h5subfile as hs
    from h5subfile import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.H5SubfileError)
    }
    assert defined <= set(hs.__all__), sorted(defined - set(hs.__all__))
    assert all(
        issubclass(getattr(hs, n), hs.H5SubfileError)
        for n in hs.__all__
        if n.endswith("Error") and n != "H5SubfileError"
    )
