#!/usr/bin/env bash
# The shell baseline for `promote check`: the same git work, one mirror at a time.
#
#   usage: check_mirrors.sh TRUNK MIRROR...      (run inside the working repository)
#
# For each mirror: fetch its TRUNK into a tracking ref, ask whether it is an ancestor of the
# local TRUNK (the candidate), and count the commits each side lacks. Prints one line per
# mirror, tab-separated: NAME STATUS HEAD BEHIND DISCARD. Exit codes follow `promote check`:
# 0 promotable, 1 blocked (a mirror diverged or is missing), 3 undecided (a mirror unreadable).
set -euo pipefail

if [ "$#" -lt 2 ]; then
    echo "usage: $0 TRUNK MIRROR..." >&2
    exit 2
fi
trunk=$1
shift

# The same environment promote gives git: plain messages, never a password prompt.
export LC_ALL=C LANG=C GIT_TERMINAL_PROMPT=0

candidate=$(git rev-parse --verify --quiet --end-of-options "refs/heads/$trunk^{commit}") || {
    echo "check_mirrors: no local branch $trunk" >&2
    exit 2
}

verdict=0
for mirror in "$@"; do
    ref="refs/remotes/$mirror/$trunk"
    # The same fetch flags promote uses, so neither side skips (or adds) work the other does.
    if ! git fetch --quiet --no-tags --no-write-fetch-head --no-auto-gc --no-recurse-submodules \
        --end-of-options "$mirror" "+refs/heads/$trunk:$ref" 2>/dev/null; then
        # Only on failure: tell a missing branch (ls-remote exit 2) from an unreachable mirror.
        rc=0
        git ls-remote --exit-code --heads "$mirror" "refs/heads/$trunk" >/dev/null 2>&1 || rc=$?
        if [ "$rc" -eq 2 ]; then
            printf '%s\tmissing\t-\t-\t-\n' "$mirror"
            [ "$verdict" -eq 3 ] || verdict=1
        else
            printf '%s\tunreachable\t-\t-\t-\n' "$mirror"
            verdict=3
        fi
        continue
    fi
    head=$(git rev-parse --verify "$ref^{commit}")
    if git merge-base --is-ancestor "$head" "$candidate"; then
        ancestor=yes
    else
        rc=$?
        # merge-base exits 1 for "no"; anything else is git failing, which must not read as "no".
        [ "$rc" -eq 1 ] || exit "$rc"
        ancestor=no
    fi
    behind=$(git rev-list --count "$candidate" "^$head")
    discard=$(git rev-list --count "$head" "^$candidate")
    if [ "$ancestor" = no ]; then
        status=diverged
        [ "$verdict" -eq 3 ] || verdict=1
    elif [ "$behind" -eq 0 ]; then
        status=up-to-date
    else
        status=fast-forward
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$mirror" "$status" "$head" "$behind" "$discard"
done
exit "$verdict"
