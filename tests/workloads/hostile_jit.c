/* A JIT-like process as an unprivileged user runs it, to attack the profiler through its perf map.
 * It generates a burning function into anonymous executable memory at a fixed address (so the test can
 * write a perf-map line for it beforehand) and makes /tmp/perf-PID.map what MODE says:
 *   own NAME      its own map, naming the code NAME (the legitimate case: must still be named)
 *   symlink PATH  a symbolic link to PATH (a root-only file, /etc/shadow)
 *   fifo          a FIFO: an open() for reading would wait for a writer forever
 *   none          nothing: the test puts a map there itself (another user's)
 * Expected stack: main -> call_jit -> [jit] code at ADDRESS, forever until SECONDS have passed.
 * Generated code (x86_64), with a frame pointer as JIT compilers keep one:
 *   push rbp; mov rbp, rsp; mov rcx, <iterations>; 1: dec rcx; jnz 1b; pop rbp; ret
 * Usage: hostile_jit ADDRESS_HEX SECONDS MODE [ARG]. Prints "ready" once the map is in place. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

typedef void (*jitted_fn)(void);

__attribute__((noinline)) void call_jit(jitted_fn f) {
    f();
    __asm__ volatile("" ::: "memory"); /* not a tail call: call_jit stays on the stack */
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    unsigned long at = strtoul(argv[1], NULL, 16);
    double end = now() + atof(argv[2]);
    const char *mode = argv[3];
    const char *arg = argc > 4 ? argv[4] : "";
    unsigned char *mem = mmap((void *)at, 4096, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (mem == MAP_FAILED || (unsigned long)mem != at) return 1;
    unsigned long iterations = 1000000;
    unsigned char code[] = {
        0x55, 0x48, 0x89, 0xe5, 0x48, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0,
        0x48, 0xff, 0xc9, 0x75, 0xfb, 0x5d, 0xc3,
    };
    memcpy(code + 6, &iterations, sizeof iterations);
    memcpy(mem, code, sizeof code);
    if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) != 0) return 1;

    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    /* A file named for this pid is an earlier process's that was killed before it could remove it
     * (pids are reused): ours now. */
    unlink(path);
    int made = 1;
    if (strcmp(mode, "own") == 0) {
        FILE *map = fopen(path, "w");
        if (!map) return 1;
        fprintf(map, "%lx %zx %s\n", at, sizeof code, arg);
        fclose(map);
    } else if (strcmp(mode, "symlink") == 0) {
        if (symlink(arg, path) != 0) return 1;
    } else if (strcmp(mode, "fifo") == 0) {
        if (mkfifo(path, 0644) != 0) return 1;
    } else {
        made = 0;
    }
    printf("ready\n");
    fflush(stdout);
    while (now() < end) call_jit((jitted_fn)mem);
    if (made) unlink(path);
    return 0;
}
