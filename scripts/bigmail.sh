#!/usr/bin/env bash
# Large-mail benchmark (BENCHMARKS.md, "Large mail"): builds inboxd and runs scripts/bigmail,
# which starts it on a fresh database and sends 60 messages of 24 MiB at once over SMTP
# while API clients read, then reports the peak resident memory and checks every message
# answered 250 is stored intact.
#   scripts/bigmail.sh                          this checkout, 60 x 24 MiB
#   scripts/bigmail.sh --old REV [args...]      also REV, built from git, in turns with this one
# Other arguments go to the benchmark program, e.g. -n 20 -size 8 -rounds 2.
set -euo pipefail
cd "$(dirname "$0")/.."
TAGS='sqlite_omit_load_extension osusergo netgo'
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old-src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
go build -tags "$TAGS" -o "$tmp/new" .
bins="new=$tmp/new"
if [ "${1:-}" = "--old" ]; then
  git worktree add --detach "$tmp/old-src" "$2" >/dev/null
  (cd "$tmp/old-src" && go build -tags "$TAGS" -o "$tmp/old" .)
  bins="old=$tmp/old,$bins"
  shift 2
fi
go run -tags "$TAGS" ./scripts/bigmail -bin "$bins" "$@"
