/* A process whose main thread exits while another thread keeps running (pthread_exit from main):
 * /proc/PID/maps is then empty, and the mappings must be read from the live thread's
 * /proc/PID/task/TID/maps. The thread sleeps until killed.
 * Usage: leader_exit */
#include <pthread.h>
#include <unistd.h>

static void *keep_running(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

int main(void) {
    pthread_t thread;
    pthread_create(&thread, NULL, keep_running, NULL);
    pthread_exit(NULL);
}
