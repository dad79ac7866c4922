/* Syscall-heavy workload: reads /dev/zero in a loop, so most time is in the kernel under read().
 * Expected stack (leaf first): kernel read path (read_zero / ksys_read / __x64_sys_read / entry_SYSCALL_64)
 * -> libc read -> read_zeros -> main. read_zeros calls read() through do_read(): glibc has no frame
 * pointers, so the frame-pointer walk from inside libc skips exactly one caller (do_read), not read_zeros.
 * Usage: syscall_heavy SECONDS */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

__attribute__((noinline)) ssize_t do_read(int fd) { return read(fd, buf, sizeof buf); }
__attribute__((noinline)) void read_zeros(int fd) { for (int i = 0; i < 64; i++) do_read(fd); }

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    int fd = open("/dev/zero", O_RDONLY);
    time_t end = time(NULL) + (time_t)seconds + 1;
    while (time(NULL) < end) read_zeros(fd);
    return 0;
}
