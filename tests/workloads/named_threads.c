/* Thread names and ids on samples: the main thread and two workers, named with pthread_setname_np
 * ("tn_alpha", "tn_beta"), burn CPU in their own function for SECONDS; the main thread names itself
 * "tn_main" and sleeps. Each worker prints "NAME TID" once named, so a test can tell which thread id
 * carries which name.
 * Usage: named_threads SECONDS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t burn_alpha(double until) {
    volatile uint64_t x = 0;
    while (now() < until)
        for (int i = 0; i < 100000; i++) x += i ^ (x >> 3);
    return x;
}

__attribute__((noinline)) static uint64_t burn_beta(double until) {
    volatile uint64_t x = 0;
    while (now() < until)
        for (int i = 0; i < 100000; i++) x += i ^ (x >> 5);
    return x;
}

static void *worker(void *arg) {
    const char *name = arg;
    pthread_setname_np(pthread_self(), name);
    printf("%s %ld\n", name, (long)syscall(SYS_gettid));
    fflush(stdout);
    double until = now() + seconds;
    if (name[3] == 'a')
        burn_alpha(until);
    else
        burn_beta(until);
    return NULL;
}

int main(int argc, char **argv) {
    seconds = argc > 1 ? atof(argv[1]) : 5;
    pthread_setname_np(pthread_self(), "tn_main");
    pthread_t t[2];
    pthread_create(&t[0], NULL, worker, "tn_alpha");
    pthread_create(&t[1], NULL, worker, "tn_beta");
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return 0;
}
