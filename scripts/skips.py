#!/usr/bin/env python3
"""The test command's skip ledger: every suite's skipped tests are recorded, counted at the
end, and a skip that scripts/declared-skips.txt does not declare fails the run.

    scripts/skips.py go SUITE DIR [go test args...]   run `go test -json ARGS` in DIR, print
                                                      what `go test` prints (package lines,
                                                      failed tests' output), record skips;
                                                      exit with go test's status
    scripts/skips.py cargo SUITE LOG                  record `cargo test`'s ignored tests
                                                      (from LOG, its output)
    scripts/skips.py pytest SUITE JUNIT_XML           record pytest's skips (--junitxml)
    scripts/skips.py report DECLARED                  print skips per suite; exit 1 on a
                                                      skip DECLARED does not name

Records go to $Y3_SKIP_DIR (one SUITE.tsv per suite: test, tab, reason). A Rust test that
skips at run time (e.g. a CPU feature it needs is absent) appends its own line there
through y3_harness::report_skip (file rust.tsv). Each suite run gets a file, empty when
nothing skipped, so that the report names every suite that ran.

DECLARED has one skip a line: `SUITE | TEST | REASON`; TEST is a shell-style pattern
(fnmatch) of the test's full name; blank lines and lines starting with # are ignored.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def skip_dir() -> Path:
    d = os.environ.get("Y3_SKIP_DIR")
    if not d:
        sys.exit("skips: Y3_SKIP_DIR is not set")
    p = Path(d)
    p.mkdir(parents=True, exist_ok=True)
    return p


def record(suite: str, skips: list[tuple[str, str]]) -> None:
    if not re.fullmatch(r"[\w-]+", suite):
        sys.exit(f"skips: suite names are letters, digits, - and _: {suite!r}")
    path = skip_dir() / f"{suite}.tsv"
    with path.open("a") as f:
        for test, reason in skips:
            f.write(f"{suite}\t{test}\t{' '.join(reason.split())}\n")


def go(suite: str, directory: str, args: list[str]) -> int:
    cmd = ["go", "test", "-json", *args]
    proc = subprocess.Popen(cmd, cwd=directory, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    output: dict[tuple[str, str], list[str]] = {}
    skips: list[tuple[str, str]] = []
    for line in proc.stdout:
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            print(line, end="")  # build errors and the like come as plain text
            continue
        key = (e.get("Package", ""), e.get("Test", ""))
        action = e.get("Action")
        if action == "output":
            output.setdefault(key, []).append(e.get("Output", ""))
            if not key[1]:
                print(e.get("Output", ""), end="")  # package lines: ok, FAIL, panics
        elif action == "skip" and key[1]:
            lines = output.get(key, [])
            # The skip's reason is what the test logged (t.Skip's message among it).
            logged = [l.strip() for l in lines if not re.match(r"\s*(===|---) ", l)]
            reason = re.sub(r"^\S+\.go:\d+: ", "", " ".join(l for l in logged if l))
            skips.append((f"{key[0]}.{key[1]}", reason or "(no reason given)"))
        elif action == "fail" and key[1]:
            print("".join(output.get(key, [])), end="")
        if action in ("pass", "fail", "skip") and key[1]:
            output.pop(key, None)
    rc = proc.wait()
    record(suite, skips)
    return rc


def cargo(suite: str, log: str) -> int:
    ignored = 0
    for line in Path(log).read_text(errors="replace").splitlines():
        m = re.match(r"test result: \w+\. \d+ passed; \d+ failed; (\d+) ignored", line)
        if m:
            ignored += int(m.group(1))
    record(suite, [("(ignored tests)", f"{ignored} #[ignore] tests")] if ignored else [])
    return 0


def pytest(suite: str, xml: str) -> int:
    skips = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        s = case.find("skipped")
        if s is not None:
            name = f"{case.get('classname')}.{case.get('name')}"
            skips.append((name, s.get("message", "")))
    record(suite, skips)
    return 0


def report(declared_file: str) -> int:
    declared = []
    for n, line in enumerate(Path(declared_file).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not all(parts):
            sys.exit(f"{declared_file}:{n}: want `SUITE | TEST | REASON`: {line}")
        declared.append(parts)
    counts: dict[str, int] = {}
    undeclared = []
    for path in sorted(skip_dir().glob("*.tsv")):
        for line in path.read_text().splitlines():
            suite, test, reason = (line.split("\t") + ["", ""])[:3]
            counts[suite] = counts.get(suite, 0) + 1
            if not any(s == suite and fnmatch.fnmatchcase(test, t) for s, t, _ in declared):
                undeclared.append(f"  {suite}: {test}: {reason}")
        counts.setdefault(path.stem, counts.get(path.stem, 0))
    print("tests skipped, per suite:")
    for suite in sorted(counts):
        print(f"  {suite:<28} {counts[suite]}")
    if undeclared:
        print(f"skips not declared in {declared_file} (a regression is never a skip):")
        print("\n".join(undeclared))
        return 1
    return 0


def main() -> int:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "go" and len(rest) >= 2:
        return go(rest[0], rest[1], rest[2:])
    if cmd == "cargo" and len(rest) == 2:
        return cargo(*rest)
    if cmd == "pytest" and len(rest) == 2:
        return pytest(*rest)
    if cmd == "report" and len(rest) == 1:
        return report(rest[0])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
