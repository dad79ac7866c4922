/* Starts and ends many short-lived threads (each sleeps 1 ms then exits), to show that per-thread
 * off-CPU state does not accumulate. Usage: thread_churn THREADS */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static void *brief(void *arg) {
    (void)arg;
    struct timespec t = {0, 1000000L};
    nanosleep(&t, NULL);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    for (int i = 0; i < n; i += 50) {
        pthread_t t[50];
        for (int j = 0; j < 50; j++) pthread_create(&t[j], NULL, brief, NULL);
        for (int j = 0; j < 50; j++) pthread_join(t[j], NULL);
    }
    return 0;
}
