"""What stops a benchmark."""

from __future__ import annotations


class BenchError(RuntimeError):
    """A benchmark that must not go on (debug build, missing extras, fastcollate disagreeing
    with transformers); the command line prints it as `error: ...` and exits with 1."""
