#!/usr/bin/env python3
"""Sums a callgrind output: total instructions (Ir), and calls into the allocator from
outside it (mimalloc's or glibc's malloc family), so nested allocator calls count once.

usage: callgrind-calls.py callgrind.out.PID  ->  prints "ir=N allocs=N"
"""
import re, sys

ALLOC = re.compile(r"^(_?mi_\w*(malloc|zalloc|calloc|realloc)\w*|malloc|calloc|realloc|__libc_malloc)$")
INSIDE = re.compile(r"^(_?mi_|__libc_|_int_)")
names, fn, cfn, ir, allocs = {}, None, None, 0, 0


def name(kind_id):
    # "(12) name" defines id 12; "(12)" refers to it.
    m = re.match(r"\((\d+)\)(?: (.*))?", kind_id)
    if not m:
        return kind_id
    if m.group(2) is not None:
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), "?")


with open(sys.argv[1]) as f:
    pending_calls = None
    for line in f:
        line = line.rstrip("\n")
        if line.startswith("fn="):
            fn = name(line[3:])
        elif line.startswith("cfn="):
            cfn = name(line[4:])
        elif line.startswith("calls="):
            pending_calls = int(line[6:].split()[0])
        elif line.startswith("totals:") or line.startswith("summary:"):
            ir = max(ir, int(line.split()[1]))
        elif pending_calls is not None and line and (line[0].isdigit() or line[0] in "+-*"):
            if ALLOC.match(cfn or "") and not INSIDE.match(fn or ""):
                allocs += pending_calls
            pending_calls = None
print(f"ir={ir} allocs={allocs}")
