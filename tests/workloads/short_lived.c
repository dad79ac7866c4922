/* A process that burns CPU in short_lived_burn for SECONDS (default 1.5) and exits, so it is gone
 * before the recording window is drained. Expected stack: short_lived_burn -> main.
 * Usage: short_lived SECONDS */
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) void short_lived_burn(double seconds) {
    volatile unsigned long x = 0;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double end = t.tv_sec + t.tv_nsec / 1e9 + seconds;
    for (;;) {
        for (int i = 0; i < 20000; i++) x += i;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec + t.tv_nsec / 1e9 > end) return;
    }
}

int main(int argc, char **argv) {
    short_lived_burn(argc > 1 ? atof(argv[1]) : 1.5);
    return 0;
}
