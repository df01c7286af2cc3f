"""Giving the C heap's free pages back to the system (glibc's ``malloc_trim``), where a scan frees large buffers.

A large buffer (a decompressed stat cache, a 4 MiB chunk of a file) comes from the heap once glibc has raised
its threshold for mapping such buffers apart, and its pages stay the process's when it is freed. They count in
what the process holds, and the pages a forked scan process comes to hold of its own count on top of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable


@functools.cache
def _trimmer() -> Callable[[], object]:
    import ctypes  # here: the first trim only, never at import (a hook imports the scan)

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = [ctypes.c_size_t]
    return functools.partial(trim, 0)


def trim_heap() -> None:
    """Give the heap's free pages back (nothing where the C library has no ``malloc_trim``)."""
    _trimmer()()


__all__ = ["trim_heap"]
