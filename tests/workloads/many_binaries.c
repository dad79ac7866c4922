/* One of many distinct binaries: compiled with -DID=n, each copy has its own code and build id, so
 * each needs its own unwind table. Burns a little CPU (0.5 ms every 40 ms) in a function of its own.
 * Expected stack (leaf first): burn_ID -> main -> __libc_start_call_main.
 * Usage: many_binaries SECONDS */
#include <stdlib.h>
#include <time.h>

#ifndef ID
#define ID 0
#endif
#define CAT(a, b) a##b
#define NAME(a, b) CAT(a, b)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long NAME(burn_, ID)(double seconds) {
    volatile unsigned long x = ID;
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 2000 + ID; i++) x += i ^ (x >> 3);
    return x;
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 10.0);
    struct timespec pause = {0, 39500000};
    unsigned long sum = 0;
    while (now() < end) {
        sum += NAME(burn_, ID)(0.0005);
        nanosleep(&pause, NULL);
    }
    volatile unsigned long sink = sum; /* keep the work */
    (void)sink;
    return 0;
}
