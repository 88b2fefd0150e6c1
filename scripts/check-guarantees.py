#!/usr/bin/env python3
"""Checks that every test docs/guarantees.md names exists, so that a renamed or deleted
test cannot leave a claim without its proof.

    scripts/check-guarantees.py docs/guarantees.md

A test is written `` `FILE::NAME` ``: FILE relative to the repository root, NAME a Rust
test (`fn NAME` under `#[test]`, `#[tokio::test]` or `proptest!`), a Go test (`func NAME(`
in a _test.go file) or a pytest test (`def NAME(`). Exits 1 naming each one missing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REF = re.compile(r"`([\w./-]+\.(?:rs|go|py))::(\w+)`")


def defined(path: Path, name: str) -> bool:
    text = path.read_text(errors="replace")
    if path.suffix == ".rs":
        # The fn, with a test attribute (or inside proptest!) among the lines just above it.
        for m in re.finditer(rf"^\s*(?:pub\s+)?(?:async\s+)?fn\s+{name}\s*\(", text, re.M):
            before = text[: m.start()].splitlines()[-6:]
            if any("#[test]" in l or "::test" in l for l in before) or "proptest!" in text:
                return True
        return False
    if path.suffix == ".go":
        return path.name.endswith("_test.go") and re.search(rf"^func {name}\(t \*testing\.T\)", text, re.M) is not None
    return re.search(rf"^(?:async\s+)?def {name}\(", text, re.M) is not None and name.startswith("test")


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    doc = Path(sys.argv[1])
    refs = REF.findall(doc.read_text())
    if not refs:
        sys.exit(f"{doc}: names no test")
    missing = []
    for file, name in refs:
        path = ROOT / file
        if not path.is_file() or not defined(path, name):
            missing.append(f"  {file}::{name}")
    print(f"{doc}: {len(refs) - len(missing)} of {len(refs)} named tests exist")
    if missing:
        print("missing (fix the test or the claim):\n" + "\n".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
