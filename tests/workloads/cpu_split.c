/* On-CPU workload: burns CPU in three named functions with a 50/30/20 split of *thread CPU time*
 * (CLOCK_THREAD_CPUTIME_ID, so CPU contention from other processes does not skew the split).
 * Expected stacks (leaf first): burn_fifty|burn_thirty|burn_twenty -> main -> __libc_start_call_main.
 * Usage: cpu_split SECONDS */
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

#define BURNER(name)                                          \
    __attribute__((noinline)) void name(double seconds) {     \
        volatile unsigned long x = 0;                         \
        double end = cpu_now() + seconds;                     \
        while (cpu_now() < end)                               \
            for (int i = 0; i < 20000; i++) x += i ^ (x >> 3); \
    }

BURNER(burn_fifty)
BURNER(burn_thirty)
BURNER(burn_twenty)

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double end = t.tv_sec + t.tv_nsec / 1e9 + seconds;
    srand((unsigned)t.tv_nsec);
    for (;;) {
        /* Each round's length varies at random (25-75 ms), the split within it does not: a fixed
         * 50 ms round beats against a 99 Hz sampler (5 x 10.1 ms drifts 0.5 ms a round, one beat
         * every ~5 s), so a recording of a few seconds saw the burners in whatever phase the beat
         * was in (57% for burn_fifty in one run). */
        double k = 0.5 + (double)rand() / RAND_MAX;
        burn_fifty(0.025 * k);
        burn_thirty(0.015 * k);
        burn_twenty(0.010 * k);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec + t.tv_nsec / 1e9 > end) return 0;
    }
}
