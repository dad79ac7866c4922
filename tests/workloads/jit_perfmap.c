/* A JIT that publishes its code the way Node (--perf-basic-prof), perf-map-agent and Python 3.12's
 * `-X perf` do: two functions generated into anonymous executable memory, each burning in its own
 * machine code, named in /tmp/perf-PID.map ("START SIZE name", hex, one line per function).
 * jit_hot runs twice as many iterations per call as jit_cold, so their samples are truly 2:1.
 * Generated code (x86_64), with a frame pointer as JIT compilers keep one:
 *   push rbp; mov rbp, rsp; mov rcx, <iterations>; 1: dec rcx; jnz 1b; pop rbp; ret
 * The map is written after the code is in place, and a third, never-called entry is appended a
 * moment later, so the map grows while the profiler reads it.
 * Usage: jit_perfmap SECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

typedef void (*jitted_fn)(void);

static size_t emit(unsigned char *at, unsigned long iterations) {
    unsigned char code[] = {
        0x55,                               /* push rbp */
        0x48, 0x89, 0xe5,                   /* mov rbp, rsp */
        0x48, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0, /* mov rcx, imm64 */
        0x48, 0xff, 0xc9,                   /* 1: dec rcx */
        0x75, 0xfb,                         /* jnz 1b */
        0x5d,                               /* pop rbp */
        0xc3,                               /* ret */
    };
    memcpy(code + 6, &iterations, sizeof iterations);
    memcpy(at, code, sizeof code);
    return sizeof code;
}

__attribute__((noinline)) void call_jit(jitted_fn f) {
    f();
    __asm__ volatile("" ::: "memory"); /* not a tail call: call_jit stays on the stack */
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 10.0);
    unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 1;
    size_t hot_size = emit(mem, 2000000);
    size_t cold_size = emit(mem + 256, 1000000);
    if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) != 0) return 1;

    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *map = fopen(path, "w");
    if (!map) return 1;
    fprintf(map, "%lx %zx jit_hot\n", (unsigned long)mem, hot_size);
    fprintf(map, "%lx %zx jit_cold\n", (unsigned long)(mem + 256), cold_size);
    fflush(map);

    double grow_at = now() + 1.0;
    int grown = 0;
    while (now() < end) {
        call_jit((jitted_fn)mem);
        call_jit((jitted_fn)(mem + 256));
        if (!grown && now() > grow_at) {
            fprintf(map, "%lx 10 jit_never_called\n", (unsigned long)(mem + 512));
            fflush(map);
            grown = 1;
        }
    }
    fclose(map);
    unlink(path);
    return 0;
}
