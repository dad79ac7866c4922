"""Two Python threads, each busy in its own function and named by its kernel thread name
(prctl PR_SET_NAME, the `comm` of its samples): py-alpha runs spin_alpha, py-beta runs spin_beta.
The main thread waits in join (off the CPU).

Expected stacks, leaf first: spin_alpha <- Thread.run <- ... for py-alpha's samples, spin_beta <- ...
for py-beta's, never the other thread's function.

Usage: python3 py_threads.py SECONDS (prints "ready" when both threads are named and running).
"""

import ctypes
import sys
import threading
import time

PR_SET_NAME = 15
libc = ctypes.CDLL(None, use_errno=True)
named = threading.Barrier(3)


def name_thread(name):
    if libc.prctl(PR_SET_NAME, name.encode(), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def spin_alpha(end):
    name_thread("py-alpha")
    named.wait()
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x = (x * 31 + i) & 0xFFFF
    return x


def spin_beta(end):
    name_thread("py-beta")
    named.wait()
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x = (x * 17 + i) & 0xFFFF
    return x


def main(seconds):
    end = time.monotonic() + seconds
    threads = [threading.Thread(target=f, args=(end,)) for f in (spin_alpha, spin_beta)]
    for t in threads:
        t.start()
    named.wait()
    print("ready", flush=True)
    for t in threads:
        t.join()


main(float(sys.argv[1]))
