"""Independent pprof decoder for the tests: compiles the public profile.proto with grpc_tools.protoc
(PyPI), decodes a gzip pprof with the Python protobuf runtime and prints a JSON digest.

Usage: decode_pprof.py PROTO_ROOT PROFILE.pb.gz"""
import gzip
import importlib
import json
import sys
import tempfile

from grpc_tools import protoc


def unresolved(loc, mapping, s):
    """An unnamed location with its mapping's range, offset and build id (None when it has no mapping)."""
    m = None
    if mapping is not None:
        m = {"filename": s[mapping.filename], "build_id": s[mapping.build_id],
             "memory_start": mapping.memory_start, "memory_limit": mapping.memory_limit,
             "file_offset": mapping.file_offset}
    return {"address": loc.address, "mapping": m}


def main() -> None:
    proto_root, path = sys.argv[1], sys.argv[2]
    out = tempfile.mkdtemp()
    rc = protoc.main(["protoc", f"-I{proto_root}", f"--python_out={out}", "perftools/profiles/profile.proto"])
    if rc != 0:
        sys.exit(f"protoc failed: {rc}")
    sys.path.insert(0, out)
    pb = importlib.import_module("perftools.profiles.profile_pb2")
    p = pb.Profile()
    p.ParseFromString(gzip.open(path).read())
    s = p.string_table
    assert s[0] == "", "string_table[0] must be empty"
    funcs = {f.id: s[f.name] for f in p.function}
    maps = {m.id: m for m in p.mapping}
    locs = {l.id: l for l in p.location}
    samples = []
    for sample in p.sample:
        names = []
        for lid in sample.location_id:
            loc = locs[lid]
            names.extend(funcs[line.function_id] for line in loc.line)
            if not loc.line:
                names.append("?")
        labels = {s[l.key]: (s[l.str] if l.str else l.num) for l in sample.label}
        samples.append({"values": list(sample.value), "labels": labels, "functions": names})
    print(json.dumps({
        "sample_types": [[s[t.type], s[t.unit]] for t in p.sample_type],
        "period_type": [s[p.period_type.type], s[p.period_type.unit]],
        "period": p.period,
        "duration_nanos": p.duration_nanos,
        "mappings": [{"filename": s[m.filename], "build_id": s[m.build_id]} for m in p.mapping],
        "samples": samples,
        # What a symbolizing backend needs for each frame sonde could not name.
        "unresolved": [unresolved(l, maps.get(l.mapping_id), s) for l in p.location if not l.line],
    }))


if __name__ == "__main__":
    main()
