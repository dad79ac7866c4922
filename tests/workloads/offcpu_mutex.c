/* Lock-wait workload. The holder thread locks, raises a flag, sleeps 40 ms in hold_lock, unlocks, then
 * sleeps 10 ms unlocked. The waiter waits for the flag (polling, 1 ms sleeps in wait_for_flag) and then
 * blocks on the mutex in wait_for_lock until the holder releases it: about 39 ms of lock wait per 50 ms.
 * Expected waiter stack: futex wait in the kernel -> libc lock wait -> wait_for_lock -> waiter.
 * (wait_for_lock locks through take_lock(): glibc has no frame pointers, the walk skips take_lock.)
 * Usage: offcpu_mutex SECONDS */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int held;
static atomic_int done;

__attribute__((noinline)) void do_sleep(long ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}
__attribute__((noinline)) void hold_lock(void) { do_sleep(40); }
__attribute__((noinline)) void take_lock(void) { pthread_mutex_lock(&lock); }
__attribute__((noinline)) void wait_for_lock(void) { take_lock(); }
__attribute__((noinline)) void wait_for_flag(void) { while (!atomic_load(&held) && !atomic_load(&done)) do_sleep(1); }

static void *waiter(void *arg) {
    (void)arg;
    while (!atomic_load(&done)) {
        wait_for_flag();
        wait_for_lock();
        atomic_store(&held, 0);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    while (time(NULL) < end) {
        pthread_mutex_lock(&lock);
        atomic_store(&held, 1);
        hold_lock();
        pthread_mutex_unlock(&lock);
        do_sleep(10);
    }
    atomic_store(&done, 1);
    pthread_join(t, NULL);
    return 0;
}
