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


def test_failures_from_elsewhere_map_into_the_hierarchy() -> None:
    """What the operating system, h5py or numpy raise becomes an H5SubfileError that is still
    the built-in (``except PermissionError`` keeps working), with errno kept."""
    import errno

    from h5subfile import errors

    cases = [
        (PermissionError(errno.EACCES, "Permission denied", "/x"), errors.PermissionDeniedError),
        (OSError(errno.EROFS, "Read-only file system"), errors.PermissionDeniedError),
        (OSError(errno.EINVAL, "Invalid argument"), errors.RankIOError),
        (NotADirectoryError(errno.ENOTDIR, "Not a directory"), errors.RankIOError),
        (FileNotFoundError(errno.ENOENT, "No such file or directory"), errors.MissingFileError),
        (FileExistsError(errno.EEXIST, "File exists"), errors.FileExistsH5SubfileError),
        (KeyError("x"), errors.ObjectNotFoundError),
        (IndexError("too far"), errors.SelectionError),
        (ValueError("bad"), errors.RankValueError),
        (TypeError("bad"), errors.RankTypeError),
        (RuntimeWarning("odd"), errors.RankFailedError),
    ]
    for original, expected in cases:
        mapped = errors.as_error(original)
        assert type(mapped) is expected, (original, mapped)
        assert isinstance(mapped, errors.H5SubfileError)
        assert type(original).__name__ in str(mapped)
        if isinstance(original, OSError):
            assert isinstance(mapped, OSError)
            assert mapped.errno == original.errno
            assert mapped.strerror and str(original.errno) in str(mapped)
        if expected not in (errors.RankIOError, errors.RankFailedError):
            assert isinstance(mapped, type(original))  # except ...Error: still catches it
    assert isinstance(errors.as_error(PermissionError(13, "no")), PermissionError)
    # the errno by name too, what a user looks up, and the file
    full = errors.as_error(OSError(errno.ENOSPC, "No space left on device", "/d/run.h5"))
    assert str(full) == "OSError: [Errno 28] No space left on device (ENOSPC): '/d/run.h5'"
    assert errors.errno_text(errno.EDQUOT) == "[Errno 122] Disk quota exceeded (EDQUOT)"


def test_failures_sent_between_ranks_keep_class_and_errno() -> None:
    """Ranks send (class name, message); the rebuilt error is the mapped class with the errno
    of the message, and an error of the hierarchy stays itself."""
    from h5subfile import errors
    from h5subfile.mpi.failures import exception_for, rebuild

    error = rebuild([(1, ("PermissionError", "[Errno 13] Permission denied: '/ro/x.h5'"))], 3)
    assert type(error) is errors.PermissionDeniedError and isinstance(error, PermissionError)
    assert error.errno == 13 and error.strerror == "Permission denied"
    assert str(error) == "[rank 1] PermissionError: [Errno 13] Permission denied: '/ro/x.h5'"
    assert error.collective
    invalid = rebuild([(0, ("OSError", "[Errno 22] Invalid argument")), (2, ("KeyError", "k"))], 3)
    assert type(invalid) is errors.RankIOError and invalid.errno == 22
    again = exception_for(("RankIOError", str(invalid)))  # re-agreed: stays itself
    assert type(again) is errors.RankIOError and again.errno == 22
    assert str(again) == str(invalid)
    assert type(rebuild([(0, ("KeyError", "'k'"))], 1)) is errors.ObjectNotFoundError
    shape = rebuild([(1, ("DataShapeError", "rank 1: data of shape (3,)"))], 3)
    assert type(shape) is errors.DataShapeError and "DataShapeError" not in str(shape)
