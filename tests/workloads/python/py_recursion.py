"""A Python recursion DEPTH deep with the CPU time at the bottom.

Expected stack, leaf first: bottom <- recurse x DEPTH <- main <- <module>. With DEPTH 400 that is
past perf's 127 frames and within a stored stack's 512 (MAX_STACK_DEPTH, native and Python frames
together).

Usage: python3 py_recursion.py SECONDS DEPTH (prints "ready" when the work starts).
"""

import sys
import time


def bottom():
    x = 0
    for i in range(20000):
        x = (x * 31 + i) & 0xFFFF
    return x


def recurse(depth):
    if depth == 0:
        return bottom()
    # Not a tail call: every level stays on the stack while bottom runs.
    return recurse(depth - 1) + 1


def main(seconds, depth):
    end = time.monotonic() + seconds
    print("ready", flush=True)
    while time.monotonic() < end:
        recurse(depth)


main(float(sys.argv[1]), int(sys.argv[2]))
