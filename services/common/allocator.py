"""Give freed request buffers back to the operating system (glibc malloc), so a process's memory
follows its configured limits instead of its largest request so far.

glibc serves allocations above `M_MMAP_THRESHOLD` with mmap and unmaps them when freed, but by default
it raises that threshold to the size of each big block freed (up to 32 MiB): after one 10 MB image
has come and gone, later 10 MB buffers come from the heap, where fragmentation keeps them resident.
Fixing the threshold (`mallopt`) turns that adjustment off, so every buffer over it (message
payloads, decoded images) is unmapped when freed. Elsewhere than glibc this does nothing.

Example::

    fix_mmap_threshold()   # at process start, before serving
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

#: glibc's mallopt parameter number for the mmap threshold.
M_MMAP_THRESHOLD = -3
#: Buffers at least this big are mmapped and returned to the system when freed.
MMAP_THRESHOLD_BYTES = 1024 * 1024


def fix_mmap_threshold(threshold_bytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Set glibc's mmap threshold to `threshold_bytes` (see the module docstring). True if it was set."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, threshold_bytes))
    log.debug("malloc mmap threshold fixed at %d bytes: %s", threshold_bytes, done)
    return done


__all__ = ["MMAP_THRESHOLD_BYTES", "fix_mmap_threshold"]
