"""The profiler: Darshan-style counters of a session's I/O (counters), their reduction over the
ranks into one document (reduction), Darshan logs mapped into that document (darshan), what the
numbers say (findings) and a page of pictures (pictures). Pure, but for the pictures' files;
io/ records into its counters."""
