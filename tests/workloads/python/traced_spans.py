"""Two operations in spans of their own, traced by Datadog's ddtrace (which publishes the span each
thread runs in as the OpenTelemetry thread context, `otel_thread_ctx_v1`, from its native module):
`checkout` burns CPU in `burn_checkout`, `search` in `burn_search`, and between them the program burns
in `burn_outside` with no span active. Each span is printed as "SPAN OPERATION TRACE_ID SPAN_ID"
(lowercase hex, as the thread context holds them) before it runs.

Usage: traced_spans.py SECONDS"""

import sys
import time

from ddtrace.trace import tracer


def burn(until):
    x = 0
    while time.monotonic() < until:
        for i in range(2000):
            x += i * i
    return x


def burn_checkout(until):
    return burn(until)


def burn_search(until):
    return burn(until)


def burn_outside(until):
    return burn(until)


def main():
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        for operation, work in (("checkout", burn_checkout), ("search", burn_search)):
            with tracer.trace(operation) as span:
                print(f"SPAN {operation} {span.trace_id:032x} {span.span_id:016x}", flush=True)
                work(time.monotonic() + 0.15)
        burn_outside(time.monotonic() + 0.05)


if __name__ == "__main__":
    main()
