/* Deep stacks: main calls recurse(DEPTH), which calls itself DEPTH times before burning CPU in
 * burn_at_bottom. Built without frame pointers; -fno-optimize-sibling-calls and the work after each
 * call keep every level a real frame.
 * Expected stack (leaf first): burn_at_bottom -> recurse x DEPTH -> main -> __libc_start_call_main.
 * Usage: recursion SECONDS DEPTH */
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long burn_at_bottom(double until) {
    volatile unsigned long x = 0;
    while (now() < until)
        for (int i = 0; i < 20000; i++) x += i ^ (x >> 3);
    return x;
}

__attribute__((noinline)) unsigned long recurse(int depth, double until) {
    if (depth == 0) return burn_at_bottom(until);
    unsigned long below = recurse(depth - 1, until);
    return below * 3 + (unsigned long)depth; /* work after the call: no tail call */
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 10.0);
    int depth = argc > 2 ? atoi(argv[2]) : 100;
    unsigned long sum = 0;
    while (now() < end) sum += recurse(depth, now() + 0.05);
    volatile unsigned long sink = sum; /* keep the work */
    (void)sink;
    return 0;
}
