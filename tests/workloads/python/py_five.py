"""Five functions with distinct shares of the CPU, called from main() in one thread, for comparing
two profilers' self time per Python function. Two of them spend their time in native code called
from Python (sorted, zlib.compress): that time is the Python function's self time when self time is
counted at the leaf-most Python frame.

Approximate shares (by work counts): mix_ints 35%, scan_text 25%, sort_batch 18%,
compress_blob 12%, sum_squares 10%. Expected stack, leaf first: [native code <-] one of the five <-
main <- <module>.

Usage: python3 py_five.py SECONDS (prints "ready" when the work starts).
"""

import random
import sys
import time
import zlib

rnd = random.Random(11)
NUMBERS = [rnd.random() for _ in range(4000)]
TEXT = "".join(rnd.choice("abcdefgh ") for _ in range(20000))
BLOB = bytes(rnd.getrandbits(4) for _ in range(1 << 15))


def mix_ints(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFF
    return x


def scan_text(n):
    words = 0
    for _ in range(n):
        for ch in TEXT[:1000]:
            if ch == " ":
                words += 1
    return words


def sort_batch(n):
    for _ in range(n):
        sorted(NUMBERS)


def compress_blob(n):
    for _ in range(n):
        zlib.compress(BLOB, 6)


def sum_squares(n):
    s = 0.0
    for i in range(n):
        s += (i * 0.5) ** 2
    return s


# Work per round of each function, sized once at start so the round splits as the docstring says.
SHARES = [(mix_ints, 35), (scan_text, 25), (sort_batch, 18), (compress_blob, 12), (sum_squares, 10)]


def calibrate(f):
    """Units of f that take about 1 ms."""
    n = 1
    while True:
        start = time.perf_counter()
        f(n)
        took = time.perf_counter() - start
        if took > 0.02:
            return max(1, int(n * 0.001 / took))
        n *= 2


def main(seconds):
    units = [(f, calibrate(f) * share // 10) for f, share in SHARES]
    end = time.monotonic() + seconds
    print("ready", flush=True)
    while time.monotonic() < end:
        for f, n in units:
            f(max(1, n))


main(float(sys.argv[1]))
