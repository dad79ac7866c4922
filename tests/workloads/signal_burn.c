/* CPU burnt inside a signal handler: a profiling timer interrupts main_work every 10 ms of CPU time
 * and the handler burns about 5 ms. Built without frame pointers.
 * Expected stacks (leaf first): handler_burn -> on_signal -> __restore_rt (glibc's signal trampoline)
 * -> main_work (the interrupted instruction) -> main -> __libc_start_call_main; and main_work -> main.
 * Usage: signal_burn SECONDS */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) void handler_burn(double seconds) {
    volatile unsigned long x = 0;
    double end = cpu_now() + seconds;
    while (cpu_now() < end)
        for (int i = 0; i < 20000; i++) x += i ^ (x >> 3);
}

__attribute__((noinline)) void on_signal(int sig) {
    (void)sig;
    handler_burn(0.005);
}

__attribute__((noinline)) unsigned long main_work(unsigned long n) {
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) x += i ^ (x >> 3);
    return x;
}

int main(int argc, char **argv) {
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval timer = {{0, 10000}, {0, 10000}};
    setitimer(ITIMER_PROF, &timer, NULL);
    unsigned long sum = 0;
    while (time(NULL) < end) sum += main_work(10000000);
    volatile unsigned long sink = sum; /* keep the work */
    (void)sink;
    return 0;
}
