"""An independent OTLP profiles receiver (grpcio + the PyPI opentelemetry-proto package, proto layout v1.10).

Started by tests/export_python_peer.rs and `cargo xtask bench --outage-minutes`. Listens on 127.0.0.1 (port
chosen by the OS, or --port so a restarted receiver comes back on the same one), prints `PORT <n>`, then one
JSON object per received Export request with what it decoded through the request's dictionary: resource
attributes, sample types, per-sample values and stacks as function names (leaf first), and when it arrived
(`received_unix_ns`, wall clock). Exits after --requests requests or --timeout seconds.
"""

import argparse
import json
import sys
import threading
import time
from concurrent import futures

import grpc
from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2,
    profiles_service_pb2_grpc,
)


def any_value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def decode(request):
    d = request.dictionary
    strings = list(d.string_table)
    out = {"resources": [], "string_table_size": len(strings), "stack_table_size": len(d.stack_table)}
    for rp in request.resource_profiles:
        res = {"attributes": {kv.key: any_value(kv.value) for kv in rp.resource.attributes}, "profiles": []}
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                samples = []
                for s in p.samples:
                    stack = d.stack_table[s.stack_index]
                    names = []
                    for li in stack.location_indices:
                        loc = d.location_table[li]
                        # The containing function is the last line of an inline chain.
                        names.append(strings[d.function_table[loc.lines[-1].function_index].name_strindex] if loc.lines else "")
                    attrs = {}
                    for ai in s.attribute_indices:
                        a = d.attribute_table[ai]
                        attrs[strings[a.key_strindex]] = any_value(a.value)
                    samples.append({"values": list(s.values), "functions": names, "attributes": attrs})
                res["profiles"].append({
                    "sample_type": strings[p.sample_type.type_strindex],
                    "unit": strings[p.sample_type.unit_strindex],
                    "scope": sp.scope.name,
                    "samples": samples,
                })
        out["resources"].append(res)
    # What a symbolizing backend needs for each frame sonde could not name: the address, the mapping's
    # range and file offset, and its attributes (the build id).
    out["unresolved"] = []
    for loc in d.location_table:
        if loc.lines:
            continue
        m = d.mapping_table[loc.mapping_index]
        attrs = {}
        for ai in m.attribute_indices:
            a = d.attribute_table[ai]
            attrs[strings[a.key_strindex]] = any_value(a.value)
        out["unresolved"].append({
            "address": loc.address,
            "mapping": {"filename": strings[m.filename_strindex], "memory_start": m.memory_start,
                        "memory_limit": m.memory_limit, "file_offset": m.file_offset, "attributes": attrs},
        })
    return out


class Service(profiles_service_pb2_grpc.ProfilesServiceServicer):
    def __init__(self, limit, done):
        self.count = 0
        self.limit = limit
        self.done = done
        self.lock = threading.Lock()

    def Export(self, request, context):
        received = time.time_ns()
        decoded = decode(request)
        decoded["received_unix_ns"] = received
        with self.lock:
            print(json.dumps(decoded, sort_keys=True), flush=True)
            self.count += 1
            if self.count >= self.limit:
                self.done.set()
        return profiles_service_pb2.ExportProfilesServiceResponse()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--port", type=int, default=0, help="0: chosen by the OS")
    args = parser.parse_args()
    done = threading.Event()
    # No SO_REUSEPORT: a second receiver on a taken --port must fail, not share the port with the first.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=[("grpc.so_reuseport", 0)])
    profiles_service_pb2_grpc.add_ProfilesServiceServicer_to_server(Service(args.requests, done), server)
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    if port == 0 or (args.port and port != args.port):
        sys.exit(f"cannot listen on 127.0.0.1:{args.port}: is another process using the port?")
    server.start()
    print(f"PORT {port}", flush=True)
    ok = done.wait(args.timeout)
    server.stop(grace=1)
    sys.exit(0 if ok else 3)


if __name__ == "__main__":
    main()
