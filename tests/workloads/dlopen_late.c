/* Loads a library (built without frame pointers) after burning CPU for a while, then burns CPU in it.
 * Prints "loaded <CLOCK_REALTIME nanoseconds>" once the library is loaded.
 * Expected stacks (leaf first): before the load, early_burn -> main; after it,
 * late_burn -> late_inner -> late_entry -> call_late -> main -> __libc_start_call_main.
 * Usage: dlopen_late LIBRARY SECONDS_BEFORE SECONDS_AFTER */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef unsigned long (*entry_fn)(double);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long early_burn(double seconds) {
    volatile unsigned long x = 0;
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 20000; i++) x += i ^ (x >> 3);
    return x;
}

__attribute__((noinline)) unsigned long call_late(entry_fn entry, double seconds) {
    return entry(seconds) + 3;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    early_burn(atof(argv[2]));
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    entry_fn entry = (entry_fn)dlsym(lib, "late_entry");
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    printf("loaded %lld\n", (long long)wall.tv_sec * 1000000000LL + wall.tv_nsec);
    fflush(stdout);
    double end = now() + atof(argv[3]);
    unsigned long sum = 0;
    while (now() < end) sum += call_late(entry, 0.05);
    volatile unsigned long sink = sum; /* keep the work */
    (void)sink;
    return 0;
}
