"""The only package that imports mpi4py: collective checks and node discovery."""
