/* Many equal short blocks: THREADS threads each sleep 1 ms in a loop in short_sleep, for SECONDS. With
 * "wait", it first waits for SIGUSR1 so the whole run falls inside a recording. At exit it prints
 * "sleeps N slept_ns T switches S": the nanosleep calls, their summed duration (the true off-CPU
 * time, to within the microseconds each call spends on the CPU) and the process's voluntary context
 * switches (getrusage, the true event count).
 * Expected off-CPU stack (leaf first): kernel nanosleep path -> libc clock_nanosleep -> short_sleep
 * -> sleeper -> thread start.
 * Usage: short_sleeps SECONDS THREADS [wait] */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double seconds;
static atomic_ulong sleeps, slept_ns;

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ULL + t.tv_nsec;
}

__attribute__((noinline)) static void short_sleep(void) {
    struct timespec t = {0, 1000000};
    unsigned long long before = now_ns();
    nanosleep(&t, NULL);
    atomic_fetch_add(&slept_ns, now_ns() - before);
    atomic_fetch_add(&sleeps, 1);
}

__attribute__((noinline)) static void *sleeper(void *arg) {
    (void)arg;
    unsigned long long end = now_ns() + (unsigned long long)(seconds * 1e9);
    while (now_ns() < end) short_sleep();
    return NULL;
}

static void on_start(int sig) { (void)sig; }

int main(int argc, char **argv) {
    seconds = argc > 1 ? atof(argv[1]) : 5.0;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 3 && strcmp(argv[3], "wait") == 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, NULL);
        signal(SIGUSR1, on_start);
        int sig;
        sigwait(&set, &sig);
    }
    struct rusage before;
    getrusage(RUSAGE_SELF, &before);
    pthread_t ids[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) pthread_create(&ids[i], NULL, sleeper, NULL);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    struct rusage after;
    getrusage(RUSAGE_SELF, &after);
    printf("sleeps %lu slept_ns %lu switches %ld\n", (unsigned long)sleeps,
           (unsigned long)slept_ns, after.ru_nvcsw - before.ru_nvcsw);
    return 0;
}
