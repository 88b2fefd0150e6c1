#!/usr/bin/env bash
# Lists Rust functions longer than a limit (default 150 lines), longest first:
# `scripts/long-functions.sh [limit] [paths...]` (default: crates/ and bindings/).
# A function runs from its `fn` line to the first `}` at the same indentation (rustfmt's
# layout), so a one-line body or a signature spread over lines counts as written.
#
# `scripts/long-functions.sh --check` (the test command's step) fails when a function over
# 150 lines is not in scripts/long-functions-allowed.txt (`path name`, one a line); an
# allowed function that is no longer over the limit fails it too, so the list only shrinks.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--check" ]; then
    allowed=scripts/long-functions-allowed.txt
    found="$("$0" 150 | awk '{ sub(/:[0-9]+$/, "", $2); print $2, $3 }' | sort)"
    # `|| true`: an empty list (no line left after the comments) is a valid list.
    listed="$({ grep -v -e '^#' -e '^ *$' "$allowed" || true; } | sort)"
    over="$(comm -23 <(printf '%s\n' "$found" | grep -v '^$' || true) <(printf '%s\n' "$listed"))"
    stale="$(comm -13 <(printf '%s\n' "$found") <(printf '%s\n' "$listed" | grep -v '^$' || true))"
    [ -z "$over" ] || { printf 'functions over 150 lines (split them by phase):\n%s\n' "$over" >&2; }
    [ -z "$stale" ] || { printf 'in %s but no longer over 150 lines (remove them):\n%s\n' "$allowed" "$stale" >&2; }
    [ -z "$over" ] && [ -z "$stale" ] || exit 1
    echo "no function over 150 lines outside $allowed ($(printf '%s\n' "$listed" | grep -c . || true) allowed)"
    exit 0
fi
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
