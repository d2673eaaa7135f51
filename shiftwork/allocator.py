"""Fixed heap thresholds for a job's process, so that its memory does not depend on its history.

glibc's ``malloc`` serves a block above its mmap threshold by a fresh mapping and returns it on
free, and raises that threshold to the size of each such block freed (up to 32 MiB). A
generate job's early allocations therefore decide where its later ones go: a job whose first
batches are larger keeps more transient tensors in its heap, whose pages it then holds. With
both thresholds fixed, every job of the same shape makes the same choices whatever its size.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # glibc's own ceiling for the moving threshold
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # the ratio glibc keeps between the two


def fix_heap_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds for this process; False where libc is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
