/* Off-CPU workload: the main thread alternates sleeping 20 ms in sleep_twenty and 10 ms in sleep_ten.
 * Expected off-CPU split 2:1. Expected stack (leaf first): kernel sleep path (schedule, do_nanosleep,
 * hrtimer_nanosleep, ...) -> libc clock_nanosleep -> sleep_twenty|sleep_ten -> main. The sleeps go through
 * do_sleep() because glibc has no frame pointers: the walk from inside libc skips one caller (do_sleep).
 * Usage: offcpu_sleep SECONDS */
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) void do_sleep(long ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}
__attribute__((noinline)) void sleep_twenty(void) { do_sleep(20); }
__attribute__((noinline)) void sleep_ten(void) { do_sleep(10); }

int main(int argc, char **argv) {
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
    while (time(NULL) < end) {
        sleep_twenty();
        sleep_ten();
    }
    return 0;
}
