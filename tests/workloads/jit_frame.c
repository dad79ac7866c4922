/* JIT-like code: main copies a small function into anonymous executable memory (no file, no unwind
 * information) that keeps a frame pointer, as JIT compilers do, and calls through it.
 * The generated code (x86_64):
 *   push rbp; mov rbp, rsp; mov rax, <jit_callee>; call rax; pop rbp; ret
 * Expected stack (leaf first): jit_callee -> [anonymous code, recovered by the frame-pointer step]
 * -> call_through_jit -> main -> __libc_start_call_main.
 * Usage: jit_frame SECONDS */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double slice_end;

__attribute__((noinline)) unsigned long jit_callee(void) {
    volatile unsigned long x = 0;
    while (now() < slice_end)
        for (int i = 0; i < 20000; i++) x += i ^ (x >> 3);
    return x;
}

typedef unsigned long (*jitted_fn)(void);

__attribute__((noinline)) unsigned long call_through_jit(jitted_fn f) { return f() + 1; }

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 10.0);
    unsigned char code[] = {
        0x55,                   /* push rbp */
        0x48, 0x89, 0xe5,       /* mov rbp, rsp */
        0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, /* mov rax, imm64 */
        0xff, 0xd0,             /* call rax */
        0x5d,                   /* pop rbp */
        0xc3,                   /* ret */
    };
    void *target = (void *)jit_callee;
    memcpy(code + 6, &target, sizeof target);
    unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 1;
    memcpy(mem, code, sizeof code);
    if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) != 0) return 1;
    unsigned long sum = 0;
    while (now() < end) {
        slice_end = now() + 0.05;
        sum += call_through_jit((jitted_fn)mem);
    }
    volatile unsigned long sink = sum; /* keep the work */
    (void)sink;
    return 0;
}
