"""CPU split between three pure-Python functions called from main(), single thread: 50% in
burn_fifty, 30% in burn_thirty and 20% in burn_twenty, set by work counts (the three have the same
body, so one step costs the same in each).

Expected stack, leaf first: burn_fifty | burn_thirty | burn_twenty <- main <- <module>, with the
line of each frame inside its function's body and the file this script's path.

Usage: python3 py_split.py SECONDS [--wait-signal] (prints "ready" when the work starts). With
--wait-signal (the benchmark), it prints "ready", waits for SIGUSR1, works SECONDS, prints
"rounds N seconds S" (its work rate) and waits for a second SIGUSR1 to exit, so a profiler can finish
while its code objects are still readable.
"""

import signal
import sys
import time

# Steps per unit of work: a round (10 units) takes about 100 ms, so each function runs for 20 to
# 50 ms at a time. Millisecond rounds alias with a 99 Hz sampler (the same phase of the round is
# sampled again and again) and skewed the split by more than 5 points.
STEP = 200000


def burn_fifty(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFF
    return x


def burn_thirty(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFF
    return x


def burn_twenty(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFF
    return x


def main(seconds, wait):
    if wait:
        # Blocked before "ready", so a signal sent as soon as it is read is not lost.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    print("ready", flush=True)
    if wait:
        signal.sigwait({signal.SIGUSR1})
    start = time.monotonic()
    end = start + seconds
    rounds = 0
    while time.monotonic() < end:
        burn_fifty(5 * STEP)
        burn_thirty(3 * STEP)
        burn_twenty(2 * STEP)
        rounds += 1
    if wait:
        print(f"rounds {rounds} seconds {time.monotonic() - start:.3f}", flush=True)
        signal.sigwait({signal.SIGUSR1})


main(float(sys.argv[1]), sys.argv[2:] == ["--wait-signal"])
