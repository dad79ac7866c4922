/* The OpenTelemetry thread context's variable in a library (OTEP 4947: `otel_thread_ctx_v1`, an
 * exported thread-local pointer to the span record), as a tracer's native module defines it; the
 * program (thread_ctx.c) loads it with dlopen and publishes through `otel_publish`. Built with the
 * TLSDESC dialect the OTEP asks for (-mtls-dialect=gnu2) or the traditional one. */
#include <stddef.h>

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1;

void otel_publish(void *record) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    otel_thread_ctx_v1 = record;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
