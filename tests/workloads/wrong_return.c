/* A stack whose return address is wrong while the sample is taken: burn_with_wrong_return replaces
 * its own return address with the address of a heap buffer (mapped, not executable) while it burns
 * CPU, and puts the real one back before it returns. A walk from it reads a return address that no
 * executable mapping holds, as a walk taking a row for another address, or a stack changed under it,
 * would. Built without frame pointers except in that function, whose frame pointer finds the slot.
 * Expected: every sample in burn_with_wrong_return cut there (the made-up caller never shown).
 * Usage: wrong_return SECONDS */
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) unsigned long
burn_with_wrong_return(double until, void *fake) {
    void **slot = (void **)__builtin_frame_address(0) + 1;
    void *real = *(void *volatile *)slot;
    *(void *volatile *)slot = fake;
    volatile unsigned long x = 0;
    while (now() < until)
        for (int i = 0; i < 20000; i++) x += i ^ (x >> 3);
    *(void *volatile *)slot = real;
    return x;
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 10.0);
    void *fake = malloc(4096);
    unsigned long sum = 0;
    while (now() < end) sum += burn_with_wrong_return(now() + 0.1, fake);
    free(fake);
    return sum == 42;
}
