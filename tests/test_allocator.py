"""The fixed heap thresholds: a block below 32 MiB then comes from the heap, not a fresh mapping."""

import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys
from shiftwork.allocator import fix_heap_thresholds

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert fix_heap_thresholds()
before = libc.mallinfo2().hblkhd
block = libc.malloc(8 * 2**20)
print(libc.mallinfo2().hblkhd - before)
libc.free(block)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_fixed_thresholds_keep_an_8_mib_block_in_the_heap():
    def mapped(mode):
        out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
        return int(out.stdout.strip())

    assert mapped("default") >= 8 * 2**20  # glibc's starting threshold is 128 KiB: a fresh mapping
    assert mapped("fixed") == 0
