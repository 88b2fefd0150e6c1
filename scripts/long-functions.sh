#!/usr/bin/env bash
# Lists Rust functions longer than a limit (default 150 lines), longest first:
# `scripts/long-functions.sh [limit] [paths...]` (default: crates/ and bindings/).
# A function runs from its `fn` line to the first `}` at the same indentation (rustfmt's
# layout), so a one-line body or a signature spread over lines counts as written.
set -euo pipefail
limit="${1:-150}"
shift || true
[ $# -gt 0 ] || set -- crates bindings
find "$@" -name '*.rs' -not -path '*/target/*' -print0 |
    xargs -0 awk -v limit="$limit" '
        FNR == 1 { open = 0 }
        !open && match($0, /^ *((pub(\([a-z]+\))? )?(const )?(async )?(unsafe )?fn [A-Za-z0-9_]+)/) {
            indent = $0; sub(/[^ ].*/, "", indent)
            name = $0; sub(/^ *(pub(\([a-z]+\))? )?(const )?(async )?(unsafe )?fn /, "", name); sub(/[^A-Za-z0-9_].*/, "", name)
            if ($0 ~ /[;}] *$/ && $0 !~ /\{ *$/) next
            start = FNR; open = 1; next
        }
        open && $0 == indent "}" {
            if (FNR - start + 1 > limit) printf "%5d %s:%d %s\n", FNR - start + 1, FILENAME, start, name
            open = 0
        }' | sort -rn
