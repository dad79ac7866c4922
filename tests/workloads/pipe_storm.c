/* A context-switch storm: two threads ping-pong one byte through two pipes, each switching out at every
 * read (tens of thousands of voluntary switches a second per thread, like perf bench sched pipe).
 * With "wait", it first waits for SIGUSR1, so a test can start it once the profiler records. It storms
 * for SECONDS, then prints "switches N roundtrips M" (N: its voluntary context switches, from
 * getrusage, the truth an estimate is compared with) and exits.
 * Expected off-CPU stack (leaf first): kernel pipe read wait -> libc read -> ping|pong -> thread start.
 * Usage: pipe_storm SECONDS [wait] */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int to_pong[2], to_ping[2];
static volatile int stop;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void *pong(void *arg) {
    (void)arg;
    char c;
    while (read(to_pong[0], &c, 1) == 1 && c != 'q')
        if (write(to_ping[1], &c, 1) != 1) break;
    return NULL;
}

__attribute__((noinline)) static unsigned long ping(double seconds) {
    unsigned long round_trips = 0;
    double end = now() + seconds;
    char c = 'x';
    while (now() < end) {
        if (write(to_pong[1], &c, 1) != 1 || read(to_ping[0], &c, 1) != 1) break;
        round_trips++;
    }
    return round_trips;
}

static void on_start(int sig) { (void)sig; }

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    if (argc > 2 && strcmp(argv[2], "wait") == 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, NULL);
        signal(SIGUSR1, on_start);
        int sig;
        sigwait(&set, &sig);
    }
    if (pipe(to_pong) != 0 || pipe(to_ping) != 0) return 1;
    struct rusage before;
    getrusage(RUSAGE_SELF, &before);
    pthread_t thread;
    pthread_create(&thread, NULL, pong, NULL);
    unsigned long round_trips = ping(seconds);
    char q = 'q';
    if (write(to_pong[1], &q, 1) != 1) return 1;
    pthread_join(thread, NULL);
    struct rusage after;
    getrusage(RUSAGE_SELF, &after);
    printf("switches %ld roundtrips %lu\n", after.ru_nvcsw - before.ru_nvcsw, round_trips);
    return 0;
}
