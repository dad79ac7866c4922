/*
 * Test binary for the unwind table builder (agent/src/unwind/table/tests). Built by the tests with
 * `gcc -O2 -fomit-frame-pointer` (and again with `-fno-asynchronous-unwind-tables -fno-unwind-tables -g`
 * for the `.debug_frame` case); its CFI is compared row by row with `readelf --debug-dump=frames-interp`.
 * Every function is `noinline` so each keeps its own FDE. What each one exercises:
 *
 * - main:        calls printf, puts, strlen, qsort, malloc, free, snprintf through the PLT, so `.plt`
 *                has stubs and binutils emits its PLT CFA expression (cfa::PLT1 / cfa::PLT2). The
 *                executable's `_start` (from crt1.o) marks the return address undefined (cfa::END).
 * - big_frame:   an 8 KiB local array: `sub $0x2000+, %rsp`, CFA = rsp + ~8 KiB (cfa::RSP, a large
 *                offset that still fits 16 bits).
 * - huge_frame:  a 100 000-byte local array: CFA = rsp + ~100 KiB, more than the 16-bit cfa_offset
 *                holds (cfa::UNSUPPORTED).
 * - vla:         a variable-length array: gcc keeps a frame pointer even with -fomit-frame-pointer,
 *                so the CFA becomes rbp + 16 and rbp is saved at CFA - 16 (cfa::RBP, rbp::AT_CFA).
 * - with_alloca: the same through alloca().
 * - many_regs:   enough live values to push every callee-saved register, rbp included, as a plain
 *                register (rbp::AT_CFA with a CFA from rsp).
 * - compare:     a qsort callback (a leaf: CFA = rsp + 8 throughout).
 */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

/* Keeps the compiler from dropping stores to `p` as dead. */
static inline void use(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

NOINLINE static int compare(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

NOINLINE static int big_frame(int n) {
    char buf[8192];
    snprintf(buf, sizeof buf, "%d", n);
    use(buf);
    return (int)strlen(buf);
}

NOINLINE static int huge_frame(int n) {
    char buf[100000];
    memset(buf, n, sizeof buf);
    use(buf);
    return buf[n % sizeof buf];
}

NOINLINE static int vla(int n) {
    char buf[n + 1];
    memset(buf, 'x', n);
    buf[n] = 0;
    use(buf);
    return (int)strlen(buf);
}

NOINLINE static int with_alloca(int n) {
    char *buf = alloca(n + 1);
    memset(buf, 'y', n);
    buf[n] = 0;
    use(buf);
    return (int)strlen(buf);
}

NOINLINE static long many_regs(long a, long b, long c, long d) {
    long v[8];
    for (int i = 0; i < 8; i++) {
        v[i] = a * i + b;
    }
    long r = 0;
    for (int i = 0; i < 8; i++) {
        r += (long)vla((int)(v[i] & 7)) * c + d * v[(i + 1) & 7] + v[(i + 3) & 7] * v[i];
        use(&r);
    }
    return r + v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

int main(int argc, char **argv) {
    (void)argv;
    int values[] = {3, 1, 2, argc};
    qsort(values, 4, sizeof values[0], compare);
    char *copy = malloc(64);
    snprintf(copy, 64, "%d", values[0]);
    printf("%d %d %d %d %ld\n", big_frame(argc), huge_frame(argc), vla(argc + 4),
           with_alloca(argc + 8), many_regs(argc, argc + 1, argc + 2, argc + 3));
    puts(copy);
    free(copy);
    return 0;
}
