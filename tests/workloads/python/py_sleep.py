"""Off-CPU: one thread alternates time.sleep(0.02) in sleep_twenty and time.sleep(0.01) in sleep_ten,
so its blocked time splits 2:1 between the two Python functions.

Expected off-CPU stack, leaf first: kernel nanosleep path <- libc clock_nanosleep <- time.sleep (C)
<- sleep_twenty | sleep_ten <- main <- <module>.

Usage: python3 py_sleep.py SECONDS (prints "ready" when the work starts).
"""

import sys
import time


def sleep_twenty():
    time.sleep(0.02)


def sleep_ten():
    time.sleep(0.01)


def main(seconds):
    end = time.monotonic() + seconds
    print("ready", flush=True)
    while time.monotonic() < end:
        sleep_twenty()
        sleep_ten()


main(float(sys.argv[1]))
