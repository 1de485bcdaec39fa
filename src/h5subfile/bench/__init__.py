"""An IOR-style benchmark comparing every way of doing the same I/O, side by side.

APIs: ``posix`` (raw positioned I/O, the ceiling), ``mpiio`` (independent or collective, with
hints), ``hdf5`` (h5subfile writing one conventional shared file), ``subfile`` (h5subfile with
subfiling) and ``phdf5`` (parallel HDF5 through h5py's mpio driver, when h5py is built with MPI).
"""
