#!/usr/bin/env python3
"""Vendors the Pyroscope and Parca protocol files sonde speaks, from git checkouts of the two projects.

Usage: vendor_backends.py PYROSCOPE_GIT_DIR PARCA_GIT_DIR OUT_DIR

Each file is taken unchanged at the commit below except for one edit: the options that only feed code
generators (`gnostic.openapi.v3` OpenAPI examples and tags in Pyroscope, `google.api.http` REST bindings
in Parca) and their imports are removed, because their definitions live in buf.build modules that are
not vendored here. Options do not change the wire format: packages, messages, fields, numbers and
services are exactly upstream's.
"""
import pathlib
import re
import subprocess
import sys

PYROSCOPE_COMMIT = "3fe6a457a32004efc46da819cbc114472d07415e"
PARCA_COMMIT = "3b5647cd9e2a6527d9c31d7d68ccf6409a57ae00"

FILES = [
    # (git dir argument index, commit, path in the repository, path under OUT_DIR)
    (0, PYROSCOPE_COMMIT, "api/push/v1/push.proto", "pyroscope/push/v1/push.proto"),
    (0, PYROSCOPE_COMMIT, "api/types/v1/types.proto", "pyroscope/types/v1/types.proto"),
    (0, PYROSCOPE_COMMIT, "api/querier/v1/querier.proto", "pyroscope/querier/v1/querier.proto"),
    (0, PYROSCOPE_COMMIT, "api/google/v1/profile.proto", "pyroscope/google/v1/profile.proto"),
    (1, PARCA_COMMIT, "proto/parca/profilestore/v1alpha1/profilestore.proto",
     "parca/parca/profilestore/v1alpha1/profilestore.proto"),
    (1, PARCA_COMMIT, "proto/parca/query/v1alpha1/query.proto", "parca/parca/query/v1alpha1/query.proto"),
    (1, PARCA_COMMIT, "proto/parca/metastore/v1alpha1/metastore.proto",
     "parca/parca/metastore/v1alpha1/metastore.proto"),
]

IMPORT = re.compile(r'^import "(gnostic/[^"]+|google/api/annotations\.proto)";\n', re.M)
FIELD_OPTION = re.compile(r'\s*\[\(gnostic\.openapi\.v3\.property\)\.example = \{yaml: "(?:[^"\\]|\\.)*"\}\]')
LINE_OPTION = re.compile(r'^\s*option \(gnostic\.openapi\.v3\.[a-z]+\)[^\n]*;\n', re.M)
HTTP_OPTION = re.compile(r'^\s*option \(google\.api\.http\) = \{(?:[^}"]|"[^"]*")*\};\n', re.M)


def strip(text: str) -> str:
    for pattern in (IMPORT, FIELD_OPTION, LINE_OPTION, HTTP_OPTION):
        text = pattern.sub("", text)
    for left in ("gnostic", "google.api.http"):
        if left in text:
            raise SystemExit(f"an option of {left} is left: extend the patterns")
    return text


def main() -> None:
    repos, out = sys.argv[1:3], pathlib.Path(sys.argv[3])
    for which, commit, path, dest in FILES:
        text = subprocess.run(["git", "-C", repos[which], "show", f"{commit}:{path}"],
                              check=True, capture_output=True, text=True).stdout
        target = out / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(strip(text))
        print(f"{dest} <- {path} @ {commit[:12]}")


if __name__ == "__main__":
    main()
