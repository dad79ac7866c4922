/* The library dlopen_late loads after it has been running for a while, built without frame pointers.
 * Expected stack (leaf first): late_burn -> late_inner -> late_entry -> (dlopen_late) call_late -> main. */
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long late_burn(double seconds) {
    volatile unsigned long x = 0;
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 20000; i++) x += i ^ (x >> 3);
    return x;
}

__attribute__((noinline)) unsigned long late_inner(double seconds) { return late_burn(seconds) + 1; }

unsigned long late_entry(double seconds) { return late_inner(seconds) + 2; }
