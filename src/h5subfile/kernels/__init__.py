"""The seed paper's I/O kernels, built on the public API only."""
