"""How a topofinder process allocates memory (docs/performance.md, "Cold search, 2026-11-26").

NumPy takes its arrays from glibc, which by default maps every block above its mmap threshold
(128 KiB, raised by frees to at most 32 MiB) afresh and unmaps it when freed, so the next
array of that size faults in and zeroes its pages again. Replaying a schedule at N = 1024 makes temporaries of 10–100 MB by the dozen:
the cold `search --n 1024 --d 4` spent 1.3–3.5 s of its 7–10 s of CPU in the kernel doing just
that. Told to serve blocks up to KEEP_FREED_BYTES from the heap and to keep that much freed
memory for reuse, the same run spends 0.15–0.4 s there, with no higher peak (421 MB, was 453).
"""

from __future__ import annotations

import ctypes

#: glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks up to this size come from the heap, and up to this much freed memory at its top is
#: kept for the next allocation instead of being returned to the system (bytes). Larger
#: blocks are still mapped and unmapped: a freed heap block stays resident until reused, so
#: at N ≥ 10^4, where single arrays pass 256 MiB, holes that large would raise the peak.
KEEP_FREED_BYTES = 1 << 28


def keep_freed_memory() -> bool:
    """Have this process's allocator reuse freed memory (module docstring). For processes
    topofinder owns: the command line and its workers, never a library caller's. False
    where the C library has no mallopt (not glibc) or refuses the values; nothing changes
    then."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, KEEP_FREED_BYTES)
                and mallopt(M_TRIM_THRESHOLD, KEEP_FREED_BYTES))


def release_freed_memory() -> bool:
    """Return the memory this process has freed to the system now (glibc malloc_trim), e.g.
    when a worker ends an item: loky restarts a worker whose resident size stays 300 MB above
    its size after the first item (a "leak"), and the restarted one imports the stack again.
    False where the C library has no malloc_trim."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    return bool(trim(0))
