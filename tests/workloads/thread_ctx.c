/* A tracer publishing the OpenTelemetry thread context (OTEP 4947) and process context (OTEP 4719),
 * written from the OTEPs: two threads run spans one after another, each span a fresh trace and span
 * id in the thread's record, with one attribute (key 0, named `span_name` by the process context's
 * key map) holding the thread's operation. Inside a span a thread burns CPU in its own function
 * (`in_span_alpha`, `in_span_beta`); between spans, with no record published, in `outside_span`.
 * Each span is printed as "SPAN OPERATION TRACE_ID SPAN_ID" (lowercase hex) before it runs.
 *
 * Built with -DCTX_IN_PROGRAM the variable is the program's own; otherwise it comes from the library
 * LIB (thread_ctx_lib.c), loaded with dlopen after the threads started.
 * Usage: thread_ctx SECONDS [LIB] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct record {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t valid;
    uint8_t trace_flags;
    uint16_t attrs_data_size;
    uint8_t attrs_data[612];
};

#ifdef CTX_IN_PROGRAM
__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;
static void publish(void *record) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    otel_thread_ctx_v1 = record;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
#else
static void (*publish)(void *);
#endif

static double seconds;
static pthread_barrier_t loaded;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t in_span_alpha(double until) {
    volatile uint64_t x = 0;
    while (now() < until)
        for (int i = 0; i < 50000; i++) x += i ^ (x >> 3);
    return x;
}

__attribute__((noinline)) static uint64_t in_span_beta(double until) {
    volatile uint64_t x = 0;
    while (now() < until)
        for (int i = 0; i < 50000; i++) x += i ^ (x >> 5);
    return x;
}

__attribute__((noinline)) static uint64_t outside_span(double until) {
    volatile uint64_t x = 0;
    while (now() < until)
        for (int i = 0; i < 50000; i++) x += i ^ (x >> 7);
    return x;
}

static void hex(char *out, const uint8_t *bytes, int n) {
    for (int i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", bytes[i]);
}

static void *worker(void *arg) {
    const char *operation = arg;
    int alpha = strcmp(operation, "alpha") == 0;
    unsigned seed = (unsigned)getpid() * 2654435761u + (alpha ? 1 : 2);
    struct record *r = calloc(1, sizeof *r);
    pthread_barrier_wait(&loaded);
    double end = now() + seconds;
    while (now() < end) {
        /* An in-place update, as the OTEP's writers do it: invalid while the fields change. */
        __atomic_store_n(&r->valid, 0, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        for (int i = 0; i < 16; i++) r->trace_id[i] = rand_r(&seed);
        for (int i = 0; i < 8; i++) r->span_id[i] = rand_r(&seed);
        r->trace_id[0] |= 1;
        size_t len = strlen(operation);
        r->attrs_data[0] = 0;
        r->attrs_data[1] = len;
        memcpy(r->attrs_data + 2, operation, len);
        r->attrs_data_size = 2 + len;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&r->valid, 1, __ATOMIC_RELAXED);
        char trace[33], span[17];
        hex(trace, r->trace_id, 16);
        hex(span, r->span_id, 8);
        pthread_mutex_lock(&out);
        printf("SPAN %s %s %s\n", operation, trace, span);
        fflush(stdout);
        pthread_mutex_unlock(&out);
        publish(r);
        double until = now() + 0.15;
        alpha ? in_span_alpha(until) : in_span_beta(until);
        publish(NULL);
        outside_span(now() + 0.05);
    }
    return NULL;
}

/* Appends a length-delimited protobuf field. */
static size_t field(uint8_t *out, int tag, const void *bytes, size_t len) {
    out[0] = tag;
    out[1] = len; /* every field here is under 128 bytes */
    memcpy(out + 2, bytes, len);
    return 2 + len;
}

/* The process context: resource `service.name`, and the thread records' key map ["span_name"]. */
static void publish_process_context(void) {
    static uint8_t payload[256];
    uint8_t a[128], b[128], c[128];
    size_t n, m, k;
    n = field(a, 0x0a, "otel-ctx-test", 13);                  /* AnyValue.string_value */
    m = field(b, 0x0a, "service.name", 12);                   /* KeyValue.key */
    m += field(b + m, 0x12, a, n);                            /* KeyValue.value */
    k = field(c, 0x0a, b, m);                                 /* Resource.attributes */
    size_t len = field(payload, 0x0a, c, k);                  /* ProcessContext.resource */
    n = field(a, 0x0a, "span_name", 9);                       /* AnyValue.string_value */
    m = field(b, 0x0a, a, n);                                 /* ArrayValue.values */
    n = field(a, 0x2a, b, m);                                 /* AnyValue.array_value */
    m = field(b, 0x0a, "threadlocal.attribute_key_map", 29);  /* KeyValue.key */
    m += field(b + m, 0x12, a, n);                            /* KeyValue.value */
    len += field(payload + len, 0x12, b, m);                  /* ProcessContext.extra_attributes */

    int fd = memfd_create("OTEL_CTX", 0);
    if (fd < 0 || ftruncate(fd, 4096) != 0) return;
    uint8_t *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (h == MAP_FAILED) return;
    uint32_t version = 2, size = len;
    uint64_t at = (uint64_t)(uintptr_t)payload, published;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    published = ts.tv_sec * 1000000000ull + ts.tv_nsec;
    memcpy(h, "OTEL_CTX", 8);
    memcpy(h + 8, &version, 4);
    memcpy(h + 12, &size, 4);
    memcpy(h + 24, &at, 8);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(h + 16, &published, 8);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: thread_ctx SECONDS [LIB]\n");
        return 2;
    }
    seconds = atof(argv[1]);
    pthread_barrier_init(&loaded, NULL, 3);
    pthread_t t[2];
    pthread_create(&t[0], NULL, worker, "alpha");
    pthread_create(&t[1], NULL, worker, "beta");
#ifndef CTX_IN_PROGRAM
    if (argc < 3) {
        fprintf(stderr, "usage: thread_ctx SECONDS LIB\n");
        return 2;
    }
    /* After the threads started: their DTVs predate the library's module. */
    void *lib = dlopen(argv[2], RTLD_NOW);
    if (!lib || !(publish = (void (*)(void *))dlsym(lib, "otel_publish"))) {
        fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
        return 1;
    }
#endif
    publish_process_context();
    pthread_barrier_wait(&loaded);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    return 0;
}
