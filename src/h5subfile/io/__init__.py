"""The only package that touches files: positioned I/O, subfiles, the master, readers."""
