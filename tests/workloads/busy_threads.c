/* Benchmark workload: two threads each run a fixed number of iterations of integer work.
 * Fixed work, not fixed time, so a profiler's overhead shows as a longer wall time.
 * Usage: busy_threads ITERATIONS */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t iterations;

__attribute__((noinline)) static uint64_t spin(uint64_t n) {
    volatile uint64_t x = 0;
    for (uint64_t i = 0; i < n; i++) x += i ^ (x >> 3);
    return x;
}

static void *worker(void *arg) {
    (void)arg;
    spin(iterations);
    return NULL;
}

int main(int argc, char **argv) {
    iterations = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000ULL;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return 0;
}
