#!/usr/bin/env python3
"""Writes a Go module proxy (GOPROXY=file://OUT) holding this repository's own Go modules at
one version, laid out as the go command fetches modules from any proxy:

    OUT/<module path>/@v/list              the versions, one a line
    OUT/<module path>/@v/<version>.info    {"Version": ..., "Time": ...}
    OUT/<module path>/@v/<version>.mod     the module's go.mod
    OUT/<module path>/@v/<version>.zip     <module path>@<version>/<file>, for every file
                                           git tracks in the module's directory, less
                                           nested modules (as a proxy serves a tag)

    module-proxy.py OUT VERSION MODULE_DIR...

It is what a consumer gets once the tags `<module dir>/<version>` exist: the test builds a
consumer with no `replace` against it (scripts/test-packages.sh).
"""

import json
import os
import subprocess
import sys
import zipfile


def module_path(directory: str) -> str:
    with open(os.path.join(directory, "go.mod"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("module "):
                return line.split()[1]
    raise SystemExit(f"{directory}/go.mod has no module line")


def main() -> None:
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    out, version, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    root = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()
    tracked = subprocess.check_output(["git", "-C", root, "ls-files", "-z"], text=True).split("\0")
    nested = {os.path.dirname(p) for p in tracked if os.path.basename(p) == "go.mod"}
    when = subprocess.check_output(["git", "-C", root, "log", "-1", "--format=%cI"], text=True).strip()
    for directory in dirs:
        rel = os.path.relpath(os.path.abspath(directory), root)
        path = module_path(os.path.join(root, rel))
        if any(c.isupper() for c in path):
            raise SystemExit(f"{path}: upper-case module paths need escaping; not supported")
        files = []
        for p in tracked:
            if not p.startswith(rel + "/"):
                continue
            # The module ends where a nested module begins.
            parent = os.path.dirname(p)
            if any(parent == n or parent.startswith(n + "/") for n in nested if n != rel and n.startswith(rel + "/")):
                continue
            files.append(p)
        at = os.path.join(out, path, "@v")
        os.makedirs(at, exist_ok=True)
        with open(os.path.join(at, "list"), "a", encoding="utf-8") as f:
            f.write(version + "\n")
        with open(os.path.join(at, version + ".info"), "w", encoding="utf-8") as f:
            json.dump({"Version": version, "Time": when}, f)
        with open(os.path.join(root, rel, "go.mod"), "rb") as src, open(os.path.join(at, version + ".mod"), "wb") as dst:
            dst.write(src.read())
        with zipfile.ZipFile(os.path.join(at, version + ".zip"), "w", zipfile.ZIP_DEFLATED) as z:
            for p in sorted(files):
                z.write(os.path.join(root, p), f"{path}@{version}/{p[len(rel) + 1:]}")
        print(f"{path}@{version}: {len(files)} files")


if __name__ == "__main__":
    main()
