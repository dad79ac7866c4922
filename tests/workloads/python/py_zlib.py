"""zlib.compress in a loop: zlib's native deflate code runs under the Python function that calls it.

Expected stack, leaf first: deflate internals (libz.so) <- zlib module (C) <- eval loop, replaced by
compress_loop <- <module>. So native libz frames sit leafward of the Python frames compress_loop and
<module> in the same stack.

Usage: python3 py_zlib.py SECONDS (prints "ready" when the work starts).
"""

import random
import sys
import time
import zlib


def compress_loop(seconds):
    # Compressible but not trivial (16 symbols): deflate searches matches, most time is in libz.
    rnd = random.Random(7)
    data = bytes(rnd.getrandbits(4) for _ in range(1 << 17))
    end = time.monotonic() + seconds
    print("ready", flush=True)
    while time.monotonic() < end:
        zlib.compress(data, 6)


compress_loop(float(sys.argv[1]))
